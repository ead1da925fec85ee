"""``lammer verify-install``: the critical components of the installed lammer and their
digests (``contract.software``), as a test lab or an auditor reads them.

* plain: each component's SHA-256 and the whole's (``info``'s ``software.digest``);
* ``--seed HEX``: each component's HMAC-SHA256 under that seed and the whole's, as a
  verifier asks (``request/authenticate`` answers the same);
* ``--manifest FILE --key PUB``: compared with an approved, signed release manifest: the
  first component that differs is named, and the status is 1.

``--root DIR`` reads another installed tree (the folder holding the packages: a copy, a
mounted controller's site-packages). Text, or ``--json``. Status 0: read (and approved when
a manifest is given); 1: differs from every manifest given; 2: cannot read the tree, the
seed, a manifest or a key.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from contract.manifest import ManifestError, load_manifest, public_keys
from contract.software import (
    SoftwareError,
    components,
    first_difference,
    installed_root,
    parse_seed,
    seeded,
    whole_digest,
)
from contract.vocabulary import lammer_version


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``lammer verify-install``."""
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        help="the folder holding the lammer packages (default: this installed lammer's)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object")
    parser.add_argument(
        "--seed", metavar="HEX", help="HMAC-SHA256 under this seed (16 to 64 bytes)"
    )
    parser.add_argument(
        "--manifest",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="an approved release manifest to compare with (repeatable)",
    )
    parser.add_argument(
        "--key",
        type=Path,
        action="append",
        default=[],
        metavar="PUB",
        help="an approved public key (PEM) the manifests must be signed with (repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    """Read the components, print them; compare with the manifests given."""
    root = args.root if args.root is not None else installed_root()
    try:
        seed = None if args.seed is None else parse_seed(args.seed)
        parts = components(root)
        keys = public_keys(args.key)
        manifests = [load_manifest(p, keys) for p in args.manifest]
    except (SoftwareError, ManifestError) as exc:
        print(f"lammer verify-install: {exc}", file=sys.stderr)
        return 2
    plain = whole_digest(parts)
    shown, whole = (parts, plain) if seed is None else seeded(parts, seed)
    result: dict[str, Any] = {
        "root": str(root),
        "version": lammer_version() if args.root is None else None,
        "seed": args.seed,
        "digest": whole,
        "components": [{"path": c.path, "digest": c.digest} for c in shown],
    }
    status = 0
    if manifests:
        actual = {c.path: c.digest for c in parts}
        approved = next((m for m in manifests if m.digest == plain), None)
        differs = None
        if approved is None:
            found = first_difference(actual, dict(manifests[0].components))
            differs = None if found is None else found[1]
            status = 1
        result["approved"] = None if approved is None else approved.name
        result["differs"] = differs
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for c in shown:
            print(f"{c.digest}  {c.path}")
        kind = "SHA-256" if seed is None else f"HMAC-SHA256 under seed {args.seed}"
        print(f"whole ({kind} over the sorted list, {len(shown)} components): {whole}")
        if manifests:
            if status == 0:
                print(f"approved: matches manifest {result['approved']}")
            else:
                print(f"NOT APPROVED: matches no manifest given; {result['differs']}")
    return status
