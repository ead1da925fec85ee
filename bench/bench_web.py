"""The screens' speed: from a device frame on the pty to the browser's DOM showing it,
beside the MQTT floor in the same run; the player page's transferred bytes.

Everything is real: a private Mosquitto, a CRAPS daemon (``lammer run``) reading a pty whose
master side this benchmark drives as the dice reader (``bench_daemon.DiceReader``:
stop-and-wait as link-layer.md says), ``lammer web`` as a subprocess, and Debian's Chromium
(headless, through Playwright) showing ``/table/<id>``.

* **Frame to DOM**: from the last byte of a ``ROLL`` frame written to the pty (wall clock
  when ``os.write`` returned) to a ``MutationObserver`` in the page seeing the last roll's
  element carry that roll id (``performance.timeOrigin + performance.now()``: the same
  machine's wall clock). Rolls go one at a time, as a table produces them.
* **Frame to MQTT**: the same frame to its ``craps/roll`` message at a subscriber in this
  process (what ``bench_daemon.py`` measures).
* **Floor**: a bare QoS 1 publish-to-receive through the same broker, messages of the same
  size, one at a time.
* **Page weight**: the bytes the player page transferred to load (HTML, CSS, modules, with
  headers: Chromium's ``encodedDataLength``), and whether updates came without a reload.

Run: ``.venv/bin/python bench/bench_web.py`` (about a minute). Prints figures; asserts
nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import aiomqtt
from playwright.async_api import Page, async_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_daemon import (
    BASE,
    EVENT_TIMEOUT,
    FLOOR_TOPIC,
    PREFIX,
    TABLE,
    BenchError,
    DiceReader,
    Run,
    Subscriber,
    measure_floor,
    pty_device,
    roll,
    rolls,
    start_broker,
    start_daemon,
    stop,
    write_config,
)
from bench.common import machine, percentile
from deploy.broker import free_port, wait_serving
from tests.helpers.browser import launch

GOAL_OVER_FLOOR_MS: Final = 50.0  # p99 frame-to-DOM within 50 ms of the floor
GOAL_PAGE_BYTES: Final = 1_000_000

OBSERVER: Final = """() => {
  window.__seen = {};
  const note = () => {
    const el = document.getElementById("lastroll");
    if (el && !(el.dataset.roll in window.__seen)) {
      window.__seen[el.dataset.roll] = performance.timeOrigin + performance.now();
    }
  };
  const all = {subtree: true, childList: true, attributes: true};
  new MutationObserver(note).observe(document.body, all);
  window.__loads = (window.__loads || 0) + 1;
}"""


@dataclass
class WebRun:
    """One run's samples, in seconds."""

    floor: list[float] = field(default_factory=list)
    mqtt: list[float] = field(default_factory=list)
    dom: list[float] = field(default_factory=list)


def start_web(
    workdir: Path, broker_port: int, prefix: str = PREFIX
) -> tuple[subprocess.Popen[bytes], str]:
    """``lammer web`` on the private broker, topics under ``prefix``; its URL once it
    listens."""
    port = free_port()
    argv = [str(Path(sys.executable).parent / "lammer"), "web", "--mqtt-port", str(broker_port)]
    argv += ["--prefix", prefix, "--listen", f"127.0.0.1:{port}"]
    with (workdir / "web.log").open("ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    if not wait_serving(proc.pid, "127.0.0.1", port, timeout=20):
        stop(proc)
        raise BenchError("lammer web did not listen")
    return proc, f"http://127.0.0.1:{port}"


async def measure(
    device: DiceReader,
    sub: Subscriber,
    page: Page,
    source: Any,
    count: int,
    run: WebRun | None,
) -> None:
    """``count`` ROLL frames, one at a time: frame to MQTT and frame to DOM."""
    for _ in range(count):
        roll_id, dice = next(source)
        arrived = sub.expect(sub.rolls, roll_id)
        async with asyncio.timeout(EVENT_TIMEOUT):
            written, _ = await device.send(functools.partial(roll, roll_id, dice))
            # The write's time on the wall clock the browser reads too.
            written_wall = written + (time.time() - time.perf_counter())
            received = await arrived
            shown_ms = await page.wait_for_function(
                f"() => window.__seen && window.__seen['{roll_id}']", timeout=EVENT_TIMEOUT * 1000
            )
            shown = float(await shown_ms.json_value()) / 1000
        if run is not None:
            run.mqtt.append(received - written)
            run.dom.append(shown - written_wall)


async def bench(args: argparse.Namespace, workdir: Path) -> tuple[list[WebRun], int, int, int]:
    """Start everything, measure, stop everything."""
    broker, port = start_broker(workdir)
    daemon: subprocess.Popen[bytes] | None = None
    web: subprocess.Popen[bytes] | None = None
    try:
        async with (
            pty_device() as (device, tty_path),
            aiomqtt.Client("127.0.0.1", port, identifier="bench-web-sub") as client,
            aiomqtt.Client("127.0.0.1", port, identifier="bench-web-pub") as publisher,
            async_playwright() as playwright,
        ):
            sub = Subscriber(client)
            await client.subscribe(f"{BASE}/craps/roll", qos=1)
            await client.subscribe(f"{BASE}/availability", qos=1)
            await client.subscribe(FLOOR_TOPIC, qos=1)
            listener = asyncio.create_task(sub.listen())
            browser = await launch(playwright)
            try:
                config = write_config(
                    workdir, workdir / "journal.db", device=tty_path, broker_port=port
                )
                daemon = start_daemon(config, workdir / "daemon.log", None)
                async with asyncio.timeout(EVENT_TIMEOUT):
                    await sub.online.wait()
                    await device.queries.wait()
                web, url = start_web(workdir, port)
                page = await browser.new_page(viewport={"width": 1920, "height": 1080})
                cdp = await page.context.new_cdp_session(page)
                await cdp.send("Network.enable")
                transferred: list[int] = []
                cdp.on(
                    "Network.loadingFinished",
                    lambda e: transferred.append(int(e["encodedDataLength"])),
                )
                await page.goto(f"{url}/table/{TABLE}", wait_until="networkidle")
                await page.wait_for_selector("#numbers", timeout=EVENT_TIMEOUT * 1000)
                page_bytes = sum(transferred)
                await page.evaluate(OBSERVER)
                source = rolls()
                await measure(device, sub, page, source, args.warmup, None)
                size = round(statistics.median(sub.roll_sizes))
                await measure_floor(publisher, sub, size, args.warmup, None)
                runs: list[WebRun] = []
                for index in range(args.repeats):
                    run = WebRun()
                    floor = Run()
                    await measure_floor(publisher, sub, size, args.events, floor)
                    run.floor = floor.floor
                    await measure(device, sub, page, source, args.events, run)
                    runs.append(run)
                    print(f"  run {index + 1} of {args.repeats} done", file=sys.stderr, flush=True)
                loads = int(await page.evaluate("window.__loads"))
            finally:
                listener.cancel()
                with contextlib.suppress(asyncio.CancelledError, aiomqtt.MqttError):
                    await listener
                await browser.close()
            return runs, page_bytes, loads, size
    finally:
        for proc in (web, daemon):
            if proc is not None:
                stop(proc)
        broker.stop()


def ms(value: float) -> str:
    """Seconds as milliseconds."""
    return f"{value * 1000:.2f}"


def report(runs: list[WebRun], page_bytes: int, loads: int, size: int, events: int) -> None:
    """Print the figures, run by run, and the goals beside them."""
    print(f"bench_web: {machine()}")
    print(f"load average (1 min): {os.getloadavg()[0]:.2f}")
    print(f"{events} ROLL frames per run, one at a time; craps/roll payload {size} bytes\n")
    print("| figure | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " |")
    print("|---|" + "---|" * len(runs))
    rows = [
        ("MQTT floor p50", [percentile(r.floor, 0.5) for r in runs]),
        ("MQTT floor p99", [percentile(r.floor, 0.99) for r in runs]),
        ("frame to MQTT p50", [percentile(r.mqtt, 0.5) for r in runs]),
        ("frame to MQTT p99", [percentile(r.mqtt, 0.99) for r in runs]),
        ("frame to DOM p50", [percentile(r.dom, 0.5) for r in runs]),
        ("frame to DOM p99", [percentile(r.dom, 0.99) for r in runs]),
    ]
    for name, values in rows:
        print(f"| {name} | " + " | ".join(f"{ms(v)} ms" for v in values) + " |")
    over = statistics.median(percentile(r.dom, 0.99) - percentile(r.floor, 0.99) for r in runs)
    verdict = "met" if over * 1000 <= GOAL_OVER_FLOOR_MS else "NOT met"
    print(
        f"\nframe-to-DOM p99 over the floor's p99 (median of runs): {ms(over)} ms "
        f"(goal <= {GOAL_OVER_FLOOR_MS:.0f} ms: {verdict})"
    )
    weight = "met" if page_bytes < GOAL_PAGE_BYTES else "NOT met"
    print(f"player page transferred: {page_bytes:,} bytes (goal < 1 MB: {weight})")
    print(f"page loads during the run: {loads} (1: every update drawn without a reload)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=200, help="frames per run")
    parser.add_argument("--repeats", type=int, default=3, help="runs")
    parser.add_argument("--warmup", type=int, default=30, help="frames before measuring")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures."""
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lammer-bench-web-") as tmp:
        try:
            runs, page_bytes, loads, size = asyncio.run(bench(args, Path(tmp)))
        except BenchError as exc:
            print(f"bench_web: {exc}", file=sys.stderr)
            return 1
    report(runs, page_bytes, loads, size, args.events)
    return 0


if __name__ == "__main__":
    sys.exit(main())
