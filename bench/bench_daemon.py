"""Daemon end to end (docs/developers/benchmarks.md, speed and footprint goals): latency
from a device frame to the display's message, beside the broker's own floor; the daemon's
idle CPU and its memory.

Everything is real: a private Mosquitto on a free port (its own config, ``set_tcp_nodelay
true``), a pty whose master side this benchmark drives as the dice reader, and the daemon
as a subprocess (``lammer run --config ...``, a CRAPS table, its journal in a temporary
directory on the machine's disk, logs as JSON lines at info into a file, as in production).

* **End to end**: from the last byte of a ``ROLL`` frame written to the pty (``os.write``
  returned) to its ``<base>/craps/roll`` message arriving at an MQTT subscriber in this
  process. The device keeps to link-layer.md: stop-and-wait on the ACK (and it waits for
  the roll's message too, so every event is measured alone, as a table produces a few a
  minute), HELLO for every QUERY, the same frame again after 500 ms or a NAK.
* **Floor**: a bare publish-to-receive round trip through the same broker in the same run:
  a second client publishes QoS 1 messages of the same size as the ``craps/roll`` payloads
  to the same subscriber, one at a time, from the ``publish()`` call to the arrival.
* Both are measured in each of several runs (interleaved, after a warm-up), p50 and p99 per
  run; the summary is the median over the runs. "Frame to ACK" (the journal's fsync
  included: an ACK means the event is durable) and the daemon's CPU time per event (from
  ``/proc/<pid>/stat``) show where the time goes.
* **Idle CPU**: after the load, the daemon's utime + stime over ``--idle`` seconds, as a
  percentage of one core. **Memory**: VmRSS and VmHWM from ``/proc/<pid>/status`` then.

Run: ``.venv/bin/python bench/bench_daemon.py`` (about a minute; ``--help`` for the
counts). ``--profile FILE`` runs the daemon under cProfile (CPU time) and writes its stats to FILE
(read them with ``python -m pstats FILE``). Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tty
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import aiomqtt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine, percentile
from deploy.broker import Broker, BrokerError, mosquitto_path
from drivers.link import BadFrame, next_seq
from drivers.messages import Ack, Decoded, DeviceMessage, Message, MessageDecoder, Nak, Query
from drivers.messages import encode_message as encode
from rules.events import MAX_ID, DeviceHello, DiceRolled

ROOT: Final = Path(__file__).resolve().parent.parent
TABLE: Final = "bench1"
PREFIX: Final = "lammer-bench"
BASE: Final = f"{PREFIX}/{TABLE}"
FLOOR_TOPIC: Final = "lammer-bench-floor/echo"
RETRANSMIT_AFTER: Final = 0.5  # link-layer.md: no ACK within 500 ms -> send the frame again
EVENT_TIMEOUT: Final = 15.0  # a message that takes this long means something broke
START_TIMEOUT: Final = 120.0  # a start under cProfile on a loaded machine takes a while
GOAL_OVER_FLOOR_MS: Final = 5.0  # docs/developers/benchmarks.md: p99 within 5 ms of the floor
GOAL_RSS_MB: Final = 80.0  # docs/developers/benchmarks.md: memory under 80 MB
GOAL_P50_OVER_FLOOR_MS: Final = 0.5  # benchmarks.md: p50 within 0.5 ms of the floor (tmpfs)
GOAL_CPU_MS: Final = 0.4  # docs/developers/benchmarks.md: CPU per frame at info logging


class BenchError(Exception):
    """The set-up did not work (broker, daemon, device link): said plainly, no timing."""


# ---------------------------------------------------------------------------- the broker


def start_broker(workdir: Path) -> tuple[Broker, int]:
    """A private Mosquitto on a free port with its own config (``set_tcp_nodelay true``:
    Nagle off on the broker's side too); returns once it listens."""
    broker = Broker(workdir)
    try:
        broker.start()
    except BrokerError as exc:
        raise BenchError(str(exc)) from exc
    return broker, broker.port


def stop(process: subprocess.Popen[bytes], *, timeout: float = 10) -> int:
    """SIGTERM, then SIGKILL if it does not end in ``timeout`` seconds; its exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


def mosquitto_version() -> str:
    """``mosquitto version x.y.z`` as the broker states it."""
    done = subprocess.run([mosquitto_path(), "-h"], capture_output=True, text=True, check=False)
    return (done.stdout or done.stderr).splitlines()[0].strip() if done.stdout else "mosquitto"


# ---------------------------------------------------------------------------- the daemon


def write_config(workdir: Path, journal: Path, *, device: str, broker_port: int) -> Path:
    """A CRAPS table reading ``device``, publishing to the private broker."""
    path = workdir / "table.toml"
    path.write_text(
        f"""[table]
id = "{TABLE}"
game = "CRAPS"

[dice_reader]
port = "{device}"

[mqtt]
host = "127.0.0.1"
port = {broker_port}
prefix = "{PREFIX}"

[journal]
path = "{journal}"

[logging]
format = "json"
level = "info"
""",
        encoding="utf-8",
    )
    return path


def start_daemon(config: Path, log: Path, profile: Path | None) -> subprocess.Popen[bytes]:
    """``lammer run --config FILE`` as a subprocess, outside systemd (no notify socket)."""
    lammer = Path(sys.executable).parent / "lammer"
    if not lammer.exists():
        lammer = ROOT / ".venv" / "bin" / "lammer"
    command = [str(lammer), "run", "--config", str(config)]
    if profile is not None:
        # CPU time, not wall time: on a shared machine a wall-clock profile charges other
        # processes' turns to whatever call was running (a socket send, a pty write).
        runner = (
            "import cProfile, runpy, sys, time\n"
            "profile = cProfile.Profile(time.process_time)\n"
            "out, sys.argv = sys.argv[1], sys.argv[2:]\n"
            "profile.enable()\n"
            "try:\n"
            "    runpy.run_path(sys.argv[0], run_name='__main__')\n"
            "finally:\n"
            "    profile.disable()\n"
            "    profile.dump_stats(out)\n"
        )
        command = [sys.executable, "-c", runner, str(profile), *command]
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM")
    }
    with log.open("ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=out, env=env, cwd=ROOT)


@dataclass(frozen=True, slots=True)
class Cpu:
    """A process's CPU time so far (utime + stime, all threads) and when it was read."""

    seconds: float
    at: float
    user: float = 0.0


def cpu_of(pid: int) -> Cpu:
    """``/proc/<pid>/stat`` fields 14 and 15 (utime, stime), in seconds (proc(5))."""
    text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    # The command name may hold spaces and parentheses: fields start after the last ')'.
    fields = text[text.rindex(")") + 2 :].split()
    ticks = int(fields[11]) + int(fields[12])  # fields 14 and 15, counted from field 3
    hz = os.sysconf("SC_CLK_TCK")
    return Cpu(ticks / hz, time.perf_counter(), int(fields[11]) / hz)


def memory_of(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM from ``/proc/<pid>/status``, in kB."""
    found: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0])
    return found


def filesystem_of(path: Path) -> str:
    """The file system type of the mount holding ``path`` (from /proc/self/mountinfo)."""
    best, kind = "", "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            mount = left.split()[4]
            if str(path).startswith(mount.rstrip("/") + "/") and len(mount) > len(best):
                best, kind = mount, right.split()[0]
    return kind


# ---------------------------------------------------------------------------- the device


class DiceReader:
    """The dice reader on the pty's master side, the device half of link-layer.md: frames
    numbered from the HELLO, stop-and-wait on the ACK, the same frame again after 500 ms
    without an answer or on a NAK, and HELLO for every QUERY."""

    def __init__(self, master: int) -> None:
        self._master = master
        self._decoder = MessageDecoder(device="dice_reader", sender="host")
        self._seq = 0
        self._lock = asyncio.Lock()  # one frame outstanding at a time (stop-and-wait)
        self._answer: asyncio.Future[tuple[Message, float]] | None = None
        self._outstanding = 0
        self._hellos: set[asyncio.Task[tuple[float, float]]] = set()
        self.queries = asyncio.Event()
        """Set at the first QUERY: the daemon has opened the port."""
        self.retransmissions = 0
        self.bad_answers = 0
        os.set_blocking(master, False)
        asyncio.get_running_loop().add_reader(master, self._readable)

    def close(self) -> None:
        """Stop reading the pty."""
        asyncio.get_running_loop().remove_reader(self._master)
        for task in self._hellos:
            task.cancel()

    def _readable(self) -> None:
        try:
            data = os.read(self._master, 4096)
        except BlockingIOError:
            return
        except OSError:  # EIO: no process has the slave open (the daemon closed it)
            return
        now = time.perf_counter()
        for item in self._decoder.feed(data):
            if isinstance(item, BadFrame):
                self.bad_answers += 1
                continue
            self._on_message(item, now)

    def _on_message(self, item: Decoded, now: float) -> None:
        message = item.message
        if isinstance(message, Query):
            self.queries.set()
            task = asyncio.create_task(self.hello())
            self._hellos.add(task)
            task.add_done_callback(self._hellos.discard)
        elif isinstance(message, Ack | Nak) and message.seq == self._outstanding:
            if self._answer is not None and not self._answer.done():
                self._answer.set_result((message, now))
        else:
            self.bad_answers += 1  # an ACK of nothing outstanding, or host-to-device junk

    async def hello(self) -> tuple[float, float]:
        """Answer a QUERY: HELLO with sequence 1, which resets the numbering."""
        hello = DeviceMessage(
            seq=1,
            fact=DeviceHello(device="dice_reader", model="BENCH", firmware="1.0", serial="B1"),
        )
        return await self.send(lambda _seq: hello, reset=True)

    async def send(
        self, make: Callable[[int], Message], *, reset: bool = False
    ) -> tuple[float, float]:
        """Send one frame (``make(seq)``), stop-and-wait: the time its last byte was written
        (the first time) and the time its ACK arrived. ``reset``: a HELLO, sequence 1."""
        async with self._lock:
            self._seq = 1 if reset else next_seq(self._seq)
            frame = encode(make(self._seq))
            self._outstanding = self._seq
            first: float | None = None
            while True:
                loop = asyncio.get_running_loop()
                self._answer = loop.create_future()
                os.write(self._master, frame)
                written = time.perf_counter()
                first = written if first is None else first
                try:
                    async with asyncio.timeout(RETRANSMIT_AFTER):
                        answer, at = await self._answer
                except TimeoutError:
                    self.retransmissions += 1
                    continue
                if isinstance(answer, Ack):
                    return first, at
                self.retransmissions += 1  # a NAK: the same frame again (link-layer.md)


# ---------------------------------------------------------------------------- the subscriber


@dataclass
class Subscriber:
    """One MQTT client in this process that receives both the daemon's ``craps/roll`` and
    the floor's echo messages, and stamps each on arrival."""

    client: aiomqtt.Client
    rolls: dict[int, asyncio.Future[float]] = field(default_factory=dict)
    echoes: dict[int, asyncio.Future[float]] = field(default_factory=dict)
    roll_sizes: list[int] = field(default_factory=list)
    not_counted: int = 0
    online: asyncio.Event = field(default_factory=asyncio.Event)

    async def listen(self) -> None:
        """Stamp and hand on every message (runs until cancelled)."""
        async for message in self.client.messages:
            now = time.perf_counter()
            payload = message.payload
            data = bytes(payload) if isinstance(payload, bytes | bytearray) else b""
            topic = message.topic.value
            if topic == f"{BASE}/availability":
                if data == b"online":
                    self.online.set()
                continue
            body = json.loads(data)
            if topic == FLOOR_TOPIC:
                waiter = self.echoes.pop(int(body["n"]), None)
            else:
                self.roll_sizes.append(len(data))
                if body.get("status") != "counted":
                    self.not_counted += 1
                waiter = self.rolls.pop(int(body["roll_id"]), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(now)

    def expect(self, table: dict[int, asyncio.Future[float]], key: int) -> asyncio.Future[float]:
        """A future set to the arrival time of message ``key`` (registered before it is sent)."""
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        table[key] = future
        return future


# ---------------------------------------------------------------------------- measurement


@dataclass
class Run:
    """One run's samples, in seconds."""

    floor: list[float] = field(default_factory=list)
    e2e: list[float] = field(default_factory=list)
    ack: list[float] = field(default_factory=list)
    cpu_per_event: float = 0.0
    user_per_event: float = 0.0
    rss_kb: int = 0


def rolls(seed: int = 5) -> Iterator[tuple[int, tuple[int, int]]]:
    """Roll ids 1, 2, ... with fair dice from a seeded generator (a realistic mix of
    series: sevens end them, Bonus Craps bets settle)."""
    rng = random.Random(seed)
    roll_id = 0
    while True:
        roll_id = roll_id % MAX_ID + 1  # dice-reader-icd.md: roll ids 1 to 999999
        yield roll_id, (rng.randint(1, 6), rng.randint(1, 6))


def roll(roll_id: int, dice: tuple[int, int], seq: int) -> DeviceMessage:
    """The ``ROLL`` frame's message with link sequence ``seq``."""
    return DeviceMessage(seq=seq, fact=DiceRolled(roll_id=roll_id, dice=dice))


async def measure_daemon(
    device: DiceReader,
    sub: Subscriber,
    source: Iterator[tuple[int, tuple[int, int]]],
    count: int,
    run: Run | None,
) -> None:
    """``count`` ROLL frames, one at a time; samples go into ``run`` (None: warm-up)."""
    for _ in range(count):
        roll_id, dice = next(source)
        arrived = sub.expect(sub.rolls, roll_id)
        async with asyncio.timeout(EVENT_TIMEOUT):
            written, acked = await device.send(functools.partial(roll, roll_id, dice))
            received = await arrived
        if run is not None:
            run.e2e.append(received - written)
            run.ack.append(acked - written)


async def measure_floor(
    publisher: aiomqtt.Client, sub: Subscriber, size: int, count: int, run: Run | None
) -> None:
    """``count`` QoS 1 messages of ``size`` bytes, one at a time, publish() to arrival."""
    for n in range(count):
        head = b'{"n":%d,"pad":"' % n
        payload = head + b"x" * max(0, size - len(head) - 2) + b'"}'
        arrived = sub.expect(sub.echoes, n)
        async with asyncio.timeout(EVENT_TIMEOUT):
            start = time.perf_counter()
            await publisher.publish(FLOOR_TOPIC, payload, qos=1)
            received = await arrived
        if run is not None:
            run.floor.append(received - start)


@dataclass
class Results:
    """Everything measured, for printing."""

    runs: list[Run]
    payload_size: int
    idle_cpu: float
    idle_seconds: float
    memory_kb: dict[str, int]
    start_rss_kb: int
    retransmissions: int
    bad_answers: int
    not_counted: int
    journal_fs: str
    load: tuple[float, float]


@contextlib.asynccontextmanager
async def pty_device() -> AsyncIterator[tuple[DiceReader, str]]:
    """A pty: the device on its master side, and the slave's path for the daemon.

    The benchmark keeps the slave open too, so the master never reads EIO while the daemon
    opens and closes its side."""
    master, slave = os.openpty()
    tty.setraw(slave)
    device = DiceReader(master)
    try:
        yield device, os.ttyname(slave)
    finally:
        device.close()
        os.close(master)
        os.close(slave)


async def bench(args: argparse.Namespace, workdir: Path, journal_dir: Path) -> Results:
    """Start broker, device and daemon (its journal in ``journal_dir``); measure; stop them
    all."""
    load_before = os.getloadavg()[0]
    broker, port = start_broker(workdir)
    daemon: subprocess.Popen[bytes] | None = None
    daemon_log = workdir / "daemon.log"
    try:
        async with (
            pty_device() as (device, tty_path),
            aiomqtt.Client("127.0.0.1", port, identifier="bench-sub") as client,
            aiomqtt.Client("127.0.0.1", port, identifier="bench-pub") as publisher,
        ):
            sub = Subscriber(client)
            await client.subscribe(f"{BASE}/craps/roll", qos=1)
            await client.subscribe(f"{BASE}/availability", qos=1)
            await client.subscribe(FLOOR_TOPIC, qos=1)
            listener = asyncio.create_task(sub.listen())
            try:
                config = write_config(
                    workdir,
                    journal_dir / "journal" / f"{TABLE}.db",
                    device=tty_path,
                    broker_port=port,
                )
                daemon = start_daemon(config, daemon_log, args.profile)
                try:
                    async with asyncio.timeout(START_TIMEOUT):
                        await sub.online.wait()
                        await device.queries.wait()
                except TimeoutError:
                    raise BenchError(
                        "the daemon did not come up (no 'online', or no QUERY on the pty)"
                    ) from None
                start_rss = memory_of(daemon.pid).get("VmRSS", 0)
                source = rolls()
                await measure_daemon(device, sub, source, args.warmup, None)
                size = round(statistics.median(sub.roll_sizes))
                await measure_floor(publisher, sub, size, args.warmup, None)
                runs: list[Run] = []
                for index in range(args.repeats):
                    run = Run()
                    await measure_floor(publisher, sub, size, args.events, run)
                    before = cpu_of(daemon.pid)
                    await measure_daemon(device, sub, source, args.events, run)
                    after = cpu_of(daemon.pid)
                    run.cpu_per_event = (after.seconds - before.seconds) / args.events
                    run.user_per_event = (after.user - before.user) / args.events
                    run.rss_kb = memory_of(daemon.pid).get("VmRSS", 0)
                    runs.append(run)
                    print(f"  run {index + 1} of {args.repeats} done", file=sys.stderr, flush=True)
                # Idle: let the outbox drain and the loop settle, then only watch.
                await asyncio.sleep(2)
                start = cpu_of(daemon.pid)
                await asyncio.sleep(args.idle)
                end = cpu_of(daemon.pid)
                idle_cpu = (end.seconds - start.seconds) / (end.at - start.at)
                memory = memory_of(daemon.pid)
            except (TimeoutError, KeyError, ValueError) as exc:
                raise BenchError(f"the measurement broke: {exc!r}") from exc
            finally:
                listener.cancel()
                with contextlib.suppress(asyncio.CancelledError, aiomqtt.MqttError):
                    await listener
            code = stop(daemon)
            daemon = None
            if code != 0:
                raise BenchError(f"the daemon exited with {code} on SIGTERM")
            return Results(
                runs=runs,
                payload_size=size,
                idle_cpu=idle_cpu,
                idle_seconds=end.at - start.at,
                memory_kb=memory,
                start_rss_kb=start_rss,
                retransmissions=device.retransmissions,
                bad_answers=device.bad_answers,
                not_counted=sub.not_counted,
                journal_fs=filesystem_of(journal_dir),
                load=(load_before, os.getloadavg()[0]),
            )
    except BenchError:
        if daemon_log.exists():
            tail = daemon_log.read_text(errors="replace").splitlines()[-15:]
            print("daemon log (last lines):", *tail, sep="\n  ", file=sys.stderr)
        raise
    finally:
        if daemon is not None:
            stop(daemon)
        broker.stop()


# ---------------------------------------------------------------------------- report


def ms(value: float) -> str:
    """Seconds as milliseconds, three decimals."""
    return f"{value * 1000:.3f}"


def report(results: Results, args: argparse.Namespace) -> None:
    """Print the figures: one row per run, then the medians and the goals."""
    rows = []
    for run in results.runs:
        rows.append(
            {
                "floor p50": percentile(run.floor, 0.50),
                "floor p99": percentile(run.floor, 0.99),
                "e2e p50": percentile(run.e2e, 0.50),
                "e2e p99": percentile(run.e2e, 0.99),
                "p99 - floor p99": percentile(run.e2e, 0.99) - percentile(run.floor, 0.99),
                "ACK p50": percentile(run.ack, 0.50),
                "ACK p99": percentile(run.ack, 0.99),
                "e2e max": max(run.e2e),
                "p50 - floor p50": percentile(run.e2e, 0.50) - percentile(run.floor, 0.50),
                "CPU/event": run.cpu_per_event,
                "user CPU/event": run.user_per_event,
            }
        )
    names = list(rows[0])
    print(f"machine: {machine()}")
    print(
        f"load average (1 min) before and after: {results.load[0]:.2f}, {results.load[1]:.2f}"
        " (the benchmark's own processes included in the second)"
    )
    print(
        f"daemon: lammer run, CRAPS table, journal on {results.journal_fs} (SQLite WAL,"
        f" synchronous=FULL), JSON logs at info to a file; {mosquitto_version()},"
        " set_tcp_nodelay true"
    )
    print(
        f"{args.repeats} runs of {args.events} ROLL frames (after {args.warmup} warm-up), one"
        f" at a time; floor: QoS 1 publish of {results.payload_size} bytes (the craps/roll"
        " payload's size) to a QoS 1 subscriber, same broker, same count"
    )
    print("all figures in ms")
    print(f"{'':16}" + "".join(f"{n:>17}" for n in names))
    for index, row in enumerate(rows, 1):
        print(f"{'run ' + str(index):16}" + "".join(f"{ms(v):>17}" for v in row.values()))
    medians = {n: statistics.median(row[n] for row in rows) for n in names}
    print(f"{'median of runs':16}" + "".join(f"{ms(v):>17}" for v in medians.values()))
    over = medians["p99 - floor p99"] * 1000
    verdict = "met" if over <= GOAL_OVER_FLOOR_MS else "missed"
    print(
        f"end to end p99 is {over:.3f} ms above the floor's p99 (goal: within"
        f" {GOAL_OVER_FLOOR_MS:g} ms): {verdict}"
    )
    p50_over = medians["p50 - floor p50"] * 1000
    print(
        f"end to end p50 is {p50_over:.3f} ms above the floor's p50 (goal with the journal on"
        f" tmpfs: within {GOAL_P50_OVER_FLOOR_MS:g} ms): "
        + ("met" if p50_over <= GOAL_P50_OVER_FLOOR_MS else "missed")
    )
    cpu = medians["CPU/event"] * 1000
    user = medians["user CPU/event"] * 1000
    print(
        f"daemon CPU per frame {cpu:.3f} ms ({user:.3f} ms in the process, {cpu - user:.3f} ms"
        f" in the kernel for it: the pty, loopback TCP to the broker, the journal's writes;"
        f" goal {GOAL_CPU_MS:g} ms at info logging): " + ("met" if cpu <= GOAL_CPU_MS else "missed")
    )
    print(
        f"device link: {results.retransmissions} retransmissions, {results.bad_answers} stray"
        f" answers; craps/roll messages not 'counted': {results.not_counted}"
    )
    print(
        f"idle CPU over {results.idle_seconds:.1f} s after the load: {results.idle_cpu:.3%} of"
        f" one core (clock tick {1 / os.sysconf('SC_CLK_TCK') * 1000:g} ms)"
    )
    rss = results.memory_kb.get("VmRSS", 0) / 1024
    hwm = results.memory_kb.get("VmHWM", 0) / 1024
    verdict = "met" if max(rss, hwm) < GOAL_RSS_MB else "missed"
    after = ", ".join(f"{run.rss_kb / 1024:.1f}" for run in results.runs)
    print(f"daemon VmRSS at start {results.start_rss_kb / 1024:.1f} MB; after each run: {after}")
    runs = results.runs
    if len(runs) > 1:
        # From the end of run 1 (warm: caches filled) to the end of the last run.
        per_event = (runs[-1].rss_kb - runs[0].rss_kb) * 1024 / (args.events * (len(runs) - 1))
        print(f"VmRSS growth under load: {per_event:,.0f} bytes per event")
    print(
        f"memory at idle after the load: VmRSS {rss:.1f} MB, VmHWM {hwm:.1f} MB"
        f" (goal: under {GOAL_RSS_MB:g} MB): {verdict}"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=3000, help="ROLL frames per run")
    parser.add_argument("--warmup", type=int, default=200, help="frames before measuring")
    parser.add_argument("--repeats", type=int, default=5, help="runs (medians are printed)")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle CPU")
    parser.add_argument("--profile", type=Path, help="run the daemon under cProfile to FILE")
    parser.add_argument(
        "--journal-dir",
        type=Path,
        help="where the daemon's journal goes (a fresh directory in it); default: the"
        " benchmark's temporary directory on the machine's disk. /dev/shm (tmpfs, where"
        " fsync costs nothing) shows what the disk's fsync adds",
    )
    args = parser.parse_args(argv)
    for name in ("events", "warmup", "repeats", "idle"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name} must be positive")
    if args.profile is not None:
        args.profile = args.profile.resolve()
    if args.journal_dir is not None and not args.journal_dir.is_dir():
        parser.error(f"--journal-dir {args.journal_dir} is not a directory")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the figures; 1 (with the reason) if it could not run."""
    args = parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="lammer-bench-") as tmp,
        tempfile.TemporaryDirectory(prefix="lammer-bench-", dir=args.journal_dir) as journal,
    ):
        try:
            results = asyncio.run(bench(args, Path(tmp), Path(journal)))
        except BenchError as exc:
            print(f"bench_daemon: {exc}", file=sys.stderr)
            return 1
    report(results, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
