"""The pit for a floor: 200 simulated tables (``bench/pit_load.py``, retained states as the
daemons publish them, no daemon) updating on ``/pit`` in Debian's Chromium, against a
private Mosquitto and ``lammer web``.

* **Frame to DOM on /pit**: each table publishes a Cover All result every ``--period``
  seconds (5 s: 40 a second for 200 tables); from the wall clock just before the publish
  to a ``MutationObserver`` in the page first seeing that table's row show that round
  (``performance.timeOrigin + performance.now()``, the same machine's clock).
* **Floor**: in the same run, a bare QoS 1 publish-to-receive through the same broker, one
  message every 50 ms, the size of a result.
* **Memory**: the page's JavaScript heap after a forced garbage collection (Chromium's
  DevTools protocol), its DOM nodes and listeners, and ``lammer web``'s resident memory,
  sampled ``--memory-samples`` times while ``--memory-messages`` results arrive at
  ``--memory-rate`` a second from every table in turn (an hour of the floor, 200 tables
  each with a result every 5 s, is 144,000: ``--memory-messages 144000``), with the
  least-squares slope of each series, over the whole run and over its second half.
* **Page weight**: the bytes each page transferred to load (HTML, CSS, modules, headers:
  Chromium's ``encodedDataLength``).

Run: ``.venv/bin/python bench/bench_pit.py`` (about three minutes); an hour of the floor:
``--seconds 10 --memory-messages 144000 --memory-rate 200 --memory-samples 24`` (about 13
minutes). Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import aiomqtt
from playwright.async_api import Browser, Page, async_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_daemon import BenchError, start_broker, stop
from bench.bench_web import GOAL_PAGE_BYTES, start_web
from bench.common import machine, percentile
from bench.pit_load import SimTable, floor, publish_floor
from tests.helpers.browser import launch

PREFIX: Final = "lammer-pit-bench"
ECHO: Final = "lammer-pit-bench-floor/echo"
GOAL_OVER_FLOOR_MS: Final = 100.0

OBSERVER: Final = """() => {
  window.__seen = {};
  const note = () => {
    const now = performance.timeOrigin + performance.now();
    for (const row of document.querySelectorAll("#pit-list .row[data-table]")) {
      const last = row.querySelector(".last");
      const key = row.dataset.table + "|" + (last ? last.textContent : "");
      if (!(key in window.__seen)) window.__seen[key] = now;
    }
  };
  window.__observer = new MutationObserver(note);
  window.__observer.observe(document.getElementById("main"),
    {subtree: true, childList: true, characterData: true});
  window.__loads = (window.__loads || 0) + 1;
}"""


ARRIVALS: Final = r"""() => {
  // When each result's frame reached the page (before the page's own handler runs).
  // And how many frames of each kind arrived (a count: it stays while the heap is read).
  window.__arrived = {};
  window.__frames = {};
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener("message", (event) => {
        const kind = (/"t":\s*"([a-z]+)"/.exec(event.data) || ["", "?"])[1];
        window.__frames[kind] = (window.__frames[kind] || 0) + 1;
        if (window.__arrived === null) return;
        const now = performance.timeOrigin + performance.now();
        const m = JSON.parse(event.data);
        if (m.t === "msg" && m.payload && m.payload.round_id !== undefined) {
          window.__arrived[m.table + "|" + m.payload.round_id] = now;
        }
      });
    }
  };
}"""


@dataclass
class Published:
    """One result sent: its table, round and wall-clock time (ms)."""

    table: str
    round_id: int
    at_ms: float


@dataclass
class Sample:
    """The memory read after ``done`` results of the memory phase."""

    done: int
    heap: int
    nodes: int
    listeners: int
    web_rss: int


@dataclass
class Figures:
    """What one run measured."""

    dom_ms: list[float] = field(default_factory=list)
    page_ms: list[float] = field(default_factory=list)
    floor_ms: list[float] = field(default_factory=list)
    missed: int = 0
    heap: list[Sample] = field(default_factory=list)
    weights: dict[str, int] = field(default_factory=dict)
    loads: int = 0
    frames: dict[str, int] = field(default_factory=dict)
    memory_sent: int = 0
    memory_seconds: float = 0.0


async def weigh(browser: Browser, url: str) -> int:
    """Bytes a fresh page transferred to load ``url``."""
    page = await browser.new_page(viewport={"width": 1920, "height": 1080})
    try:
        cdp = await page.context.new_cdp_session(page)
        await cdp.send("Network.enable")
        sizes: list[int] = []
        cdp.on("Network.loadingFinished", lambda e: sizes.append(int(e["encodedDataLength"])))
        await page.goto(url, wait_until="networkidle")
        return sum(sizes)
    finally:
        await page.close()


async def memory(page: Page, web: subprocess.Popen[bytes], done: int) -> Sample:
    """The page's used JavaScript heap (bytes, after a forced garbage collection), its DOM
    counters, and ``lammer web``'s resident memory."""
    cdp = await page.context.new_cdp_session(page)
    await cdp.send("HeapProfiler.collectGarbage")
    usage = await cdp.send("Runtime.getHeapUsage")
    counters = await cdp.send("Memory.getDOMCounters")
    await cdp.detach()
    return Sample(
        done=done,
        heap=int(usage["usedSize"]),
        nodes=int(counters["nodes"]),
        listeners=int(counters["jsEventListeners"]),
        web_rss=rss(web.pid),
    )


def rss(pid: int) -> int:
    """A process's resident memory in bytes (``VmRSS``), 0 when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def slope(points: list[tuple[int, int]]) -> float:
    """The least-squares slope of ``(x, y)`` points (y per x), 0 for fewer than two."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in points) / sxx


async def results(
    client: aiomqtt.Client,
    sims: list[SimTable],
    rate: float,
    count: int,
    sent: list[Published] | None,
    *,
    every_table: bool = False,
    first: int = 0,
) -> None:
    """``count`` results at ``rate`` a second, round-robin over the poker tables (the
    frame-to-DOM phase times rounds) or over ``every_table`` (a craps table's result is
    its board), starting at the ``first``-th of them."""
    chosen = sims if every_table else [s for s in sims if s.game != "CRAPS"]
    loop = asyncio.get_running_loop()
    start = loop.time()
    for n in range(count):
        sim = chosen[(first + n) % len(chosen)]
        topic, payload = sim.result(datetime.now(UTC))
        at_ms = time.time() * 1000
        await client.publish(f"{PREFIX}/{sim.table}/{topic}", payload, qos=1, retain=True)
        if sent is not None:
            sent.append(Published(sim.table, sim.round_id, at_ms))
        delay = start + (n + 1) / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)


async def echoes(publisher: aiomqtt.Client, receiver: aiomqtt.Client, out: list[float]) -> None:
    """The floor: one message every 50 ms, publish() to arrival (runs until cancelled)."""
    await receiver.subscribe(ECHO, qos=1)
    waiting: dict[int, float] = {}

    async def listen() -> None:
        async for message in receiver.messages:
            now = time.perf_counter()
            payload = message.payload
            n = int(json.loads(bytes(payload) if isinstance(payload, bytes | bytearray) else b"0"))
            sent = waiting.pop(n, None)
            if sent is not None:
                out.append((now - sent) * 1000)

    listener = asyncio.create_task(listen())
    try:
        n = 0
        while True:
            n += 1
            waiting[n] = time.perf_counter()
            await publisher.publish(ECHO, json.dumps(n).encode().ljust(700), qos=1)
            await asyncio.sleep(0.05)
    finally:
        listener.cancel()
        with contextlib.suppress(asyncio.CancelledError, aiomqtt.MqttError):
            await listener


async def bench(args: argparse.Namespace, workdir: Path) -> Figures:
    """Start everything, measure, stop everything."""
    broker, port = start_broker(workdir)
    web: subprocess.Popen[bytes] | None = None
    figures = Figures()
    sims = floor(args.tables, "pit")
    try:
        async with (
            aiomqtt.Client("127.0.0.1", port, identifier="pit-bench-load") as loader,
            aiomqtt.Client("127.0.0.1", port, identifier="pit-bench-echo-out") as echo_out,
            aiomqtt.Client("127.0.0.1", port, identifier="pit-bench-echo-in") as echo_in,
            async_playwright() as playwright,
        ):
            await publish_floor(loader, PREFIX, sims)
            web, url = start_web(workdir, port, PREFIX)
            browser = await launch(playwright)
            try:
                poker = next(s.table for s in sims if s.game == "UTH")
                dice = next(s.table for s in sims if s.game == "CRAPS")
                for path in ("/pit", f"/pit/{poker}", f"/table/{poker}", f"/stick/{dice}"):
                    figures.weights[path] = await weigh(browser, url + path)
                page = await browser.new_page(viewport={"width": 1920, "height": 1080})
                await page.add_init_script(f"({ARRIVALS})()")
                await page.goto(f"{url}/pit")
                # A function, not an expression: the page's CSP forbids the eval Playwright
                # would poll an expression with.
                await page.wait_for_function(
                    "(n) => document.querySelectorAll('#pit-list .row[data-table]').length === n",
                    arg=len(sims),
                    timeout=60_000,
                )
                await page.evaluate(OBSERVER)
                # Frame to DOM, beside the floor.
                sent: list[Published] = []
                floor_task = asyncio.create_task(echoes(echo_out, echo_in, figures.floor_ms))
                rate = len([s for s in sims if s.game != "CRAPS"]) / args.period
                await results(loader, sims, rate, int(rate * args.seconds), sent)
                await asyncio.sleep(2)  # the last ones drawn
                floor_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await floor_task
                seen: dict[str, float] = await page.evaluate("window.__seen")
                arrived: dict[str, float] = await page.evaluate("window.__arrived")
                first: dict[tuple[str, int], float] = {}
                for key, at in seen.items():
                    table, _, text = key.partition("|")
                    if text.startswith("round "):
                        round_id = int(text.split()[1].rstrip(":"))
                        first.setdefault((table, round_id), at)
                for p in sent:
                    drawn = first.get((p.table, p.round_id))
                    if drawn is None:
                        figures.missed += 1
                    else:
                        figures.dom_ms.append(drawn - p.at_ms)
                    came = arrived.get(f"{p.table}|{p.round_id}")
                    if came is not None:
                        figures.page_ms.append(came - p.at_ms)
                # Memory, while many more results arrive (the measuring above switched off
                # and its records dropped, so the heap is the page's own).
                await page.evaluate(
                    "window.__observer.disconnect(); window.__seen = null; window.__arrived = null"
                )
                before: dict[str, int] = await page.evaluate("window.__frames")
                assert web is not None
                figures.heap.append(await memory(page, web, 0))
                step = max(1, -(-args.memory_messages // max(1, args.memory_samples)))
                done = 0
                began = time.perf_counter()
                while done < args.memory_messages:
                    count = min(step, args.memory_messages - done)
                    await results(
                        loader, sims, args.memory_rate, count, None, every_table=True, first=done
                    )
                    done += count
                    await asyncio.sleep(1)
                    figures.heap.append(await memory(page, web, done))
                figures.memory_seconds = time.perf_counter() - began
                figures.memory_sent = done
                after: dict[str, int] = await page.evaluate("window.__frames")
                figures.frames = {k: v - before.get(k, 0) for k, v in after.items()}
                figures.loads = int(await page.evaluate("window.__loads"))
            finally:
                await browser.close()
        return figures
    finally:
        if web is not None:
            stop(web)
        broker.stop()


def report(figures: Figures, args: argparse.Namespace) -> None:
    """Print the figures and the goals beside them."""
    print(f"bench_pit: {machine()}")
    print(f"load average (1 min): {os.getloadavg()[0]:.2f}")
    poker = len([s for s in floor(args.tables) if s.game != "CRAPS"])
    print(
        f"{args.tables} tables ({poker} publishing a Cover All result every {args.period:g} s: "
        f"{poker / args.period:.0f} a second) for {args.seconds:g} s\n"
    )
    dom, flo = figures.dom_ms, figures.floor_ms
    print("| figure | p50 | p99 | max | samples |")
    print("|---|---|---|---|---|")
    rows = (
        ("MQTT floor (publish to receive)", flo),
        ("publish to the page's WebSocket", figures.page_ms),
        ("frame to DOM on /pit", dom),
    )
    for name, samples in rows:
        print(
            f"| {name} | {percentile(samples, 0.5):.1f} ms | {percentile(samples, 0.99):.1f} ms "
            f"| {max(samples):.1f} ms | {len(samples)} |"
        )
    print(
        f"\nresults never seen drawn (a newer one of the same table came first): {figures.missed}"
    )
    over = percentile(dom, 0.99) - percentile(flo, 0.99)
    verdict = "met" if over <= GOAL_OVER_FLOOR_MS else "NOT met"
    print(f"frame-to-DOM p99 over the floor's p99: {over:.1f} ms (goal <= 100 ms: {verdict})")
    memory_report(figures, args)
    print(f"page loads during the run: {figures.loads} (1: no reload)")
    print("\n| page | transferred |")
    print("|---|---|")
    for path, size in figures.weights.items():
        goal = "met" if size < GOAL_PAGE_BYTES else "NOT met"
        print(f"| `{path}` | {size:,} bytes (goal < 1 MB: {goal}) |")


def memory_report(figures: Figures, args: argparse.Namespace) -> None:
    """The memory series, its slopes, and what the page received meanwhile."""
    if figures.memory_sent:
        per_table = figures.memory_sent / args.tables
        print(
            f"\nmemory phase: {figures.memory_sent:,} results from all {args.tables} tables "
            f"({per_table:,.0f} each: {per_table * args.period / 3600:.2f} h of a result every "
            f"{args.period:g} s) in {figures.memory_seconds:.0f} s "
            f"({figures.memory_sent / figures.memory_seconds:.0f} a second)"
        )
        print(
            f"frames the page received meanwhile, by kind: {dict(sorted(figures.frames.items()))}"
        )
    print("\n| results | JS heap after GC | DOM nodes | JS listeners | lammer web RSS |")
    print("|---|---|---|---|---|")
    for s in figures.heap:
        print(
            f"| {s.done:,} | {s.heap / 1e6:.2f} MB | {s.nodes:,} | {s.listeners:,} "
            f"| {s.web_rss / 1e6:.1f} MB |"
        )
    half = [s for s in figures.heap if s.done >= figures.memory_sent / 2]
    for name, samples in (("whole run", figures.heap), ("second half", half)):
        heap = slope([(s.done, s.heap) for s in samples]) * 10_000 / 1e3
        nodes = slope([(s.done, s.nodes) for s in samples]) * 10_000
        web = slope([(s.done, s.web_rss) for s in samples]) * 10_000 / 1e3
        print(
            f"slope, {name} ({len(samples)} samples), per 10,000 results: JS heap "
            f"{heap:+.1f} kB, DOM nodes {nodes:+.1f}, lammer web RSS {web:+.1f} kB"
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--period", type=float, default=5.0, help="seconds between results")
    parser.add_argument("--seconds", type=float, default=60.0, help="frame-to-DOM phase")
    parser.add_argument("--memory-messages", type=int, default=12_000)
    parser.add_argument("--memory-rate", type=float, default=100.0, help="results a second")
    parser.add_argument(
        "--memory-samples", type=int, default=4, help="memory reads after the first"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures."""
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lammer-bench-pit-") as tmp:
        try:
            figures = asyncio.run(bench(args, Path(tmp)))
        except BenchError as exc:
            print(f"bench_pit: {exc}", file=sys.stderr)
            return 1
    report(figures, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
