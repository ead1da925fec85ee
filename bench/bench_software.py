"""What software authentication costs (docs/auditors/software-authentication.md): reading every
critical component of the installed lammer and hashing it, as the daemon does at start
(the plain digest of ``info``) and for each ``request/authenticate`` (the seeded answer),
and the size of that answer on the wire.

Run: ``.venv/bin/python bench/bench_software.py [--runs 30]``. Each run reads the files
afresh (the page cache warm after the first, as on a running controller). Prints the
median, the 90th percentile and the worst of the wall-clock milliseconds, and the CPU
milliseconds (``process_time``) per read; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from contract.software import components, installed_root, seeded, whole_digest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    root = installed_root()
    plain: list[float] = []
    keyed: list[float] = []
    cpu: list[float] = []
    answer = b""
    for _ in range(args.runs):
        wall, proc = time.perf_counter(), time.process_time()
        parts = components(root)
        whole_digest(parts)
        plain.append((time.perf_counter() - wall) * 1000)
        cpu.append((time.process_time() - proc) * 1000)
        wall = time.perf_counter()
        macs, digest = seeded(components(root), os.urandom(32))
        keyed.append((time.perf_counter() - wall) * 1000)
        answer = json.dumps(
            {"digest": digest, "components": [{"path": c.path, "hmac": c.digest} for c in macs]}
        ).encode()
    size = sum((root / c.path).stat().st_size for c in parts)
    print(f"{len(parts)} components, {size / 1e6:.2f} MB, root {root}, load {os.getloadavg()}")
    for name, values in (("plain digest (start)", plain), ("seeded answer", keyed)):
        q = statistics.quantiles(values, n=10)
        print(
            f"{name}: median {statistics.median(values):.1f} ms, p90 {q[-1]:.1f} ms, "
            f"worst {max(values):.1f} ms"
        )
    print(f"plain digest CPU: median {statistics.median(cpu):.1f} ms")
    print(f"answer's components and digest as JSON: {len(answer)} bytes")


if __name__ == "__main__":
    main()
