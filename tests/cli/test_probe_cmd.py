"""``lammer probe``: the installed command, run as a subprocess against a simulator on a pty
(``lammer-sim``, a process of its own), a silent pty, a simulator at another baud rate than
the probe's (garbage, ``lammer-sim --baud``), a missing device, a busy port, a table's file
and a device server (ser2net, RFC 2217): each with its exact output and exit status."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import tty
from collections.abc import Iterator
from pathlib import Path

import pytest
import serial

from tests.device_servers import Ser2net

pytestmark = pytest.mark.heavy  # each runs lammer probe, and most lammer-sim, as processes

BIN = Path(sys.executable).parent
WAIT = 60.0  # a bound on a failure, never what is tested
SHUFFLER_ANSWER = [
    "answered: shuffler IDEAL-SIM, firmware 2.1.0, serial number SN0001",
    "mode: CSP",
]
ROUND_TRIP = re.compile(r"round trip: \d+\.\d ms \(median of \d+ QUERY, \d+\.\d to \d+\.\d ms\)")
CLEAN = "line in 1 s: 0 NAKs, 0 retransmissions, 0 bytes of noise"


def probe(*args: str | Path, seconds: int = 1) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "lammer"), "probe", "--seconds", str(seconds), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )


class Sim:
    """A ``lammer-sim`` at ``link``, lingering: it answers QUERY until stopped."""

    def __init__(self, link: Path, *args: str) -> None:
        self.link = link
        self.err = link.with_suffix(".err")
        self.record = link.with_suffix(".record")
        argv = [str(BIN / "lammer-sim"), *args, "--link", str(link), "--linger", "--seed", "1"]
        with self.err.open("wb") as err:
            self.proc = subprocess.Popen(
                [*argv, "--record", str(self.record)],
                stdout=subprocess.DEVNULL,
                stderr=err,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + WAIT
        while not link.exists():
            assert self.proc.poll() is None, self.err.read_text()
            assert time.monotonic() < deadline, "the simulator's pty never came"
            time.sleep(0.01)

    def acknowledged(self) -> list[str]:
        """The types of the frames the simulator saw acknowledged (its ``--record``)."""
        return [line.split(",")[0] for line in self.record.read_text().splitlines()]

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=WAIT)


@pytest.fixture
def shuffler(tmp_path: Path) -> Iterator[Sim]:
    sim = Sim(tmp_path / "shuffler", "shuffler", "--game", "CSP", "--rounds", "0")
    yield sim
    sim.stop()


def lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.stderr == "", result.stderr
    return result.stdout.splitlines()


def test_a_shuffler_answers(shuffler: Sim) -> None:
    result = probe(shuffler.link)
    port, *answer, trip, line = lines(result)
    assert port == f"port: {shuffler.link}, 115200 8N1"
    assert answer == SHUFFLER_ANSWER
    assert ROUND_TRIP.fullmatch(trip), trip
    assert line == CLEAN
    assert result.returncode == 0


def test_a_dice_reader_answers(tmp_path: Path) -> None:
    sim = Sim(tmp_path / "dice", "dice", "--rolls", "0")
    try:
        result = probe(sim.link, "--device", "dice_reader")
    finally:
        sim.stop()
    port, answered, mode, trip, line = lines(result)
    assert port == f"port: {sim.link}, 115200 8N1"
    assert answered == "answered: dice reader DICE-SIM, firmware 1.0.0, serial number DR0042"
    assert mode == "mode: none (a dice reader has none)"
    assert ROUND_TRIP.fullmatch(trip), trip
    assert line == CLEAN
    assert result.returncode == 0


def test_a_silent_port(tmp_path: Path) -> None:
    master, slave = os.openpty()
    tty.setraw(slave)
    link = tmp_path / "silent"
    link.symlink_to(os.ttyname(slave))
    try:
        result = probe(link)
        os.set_blocking(master, False)
        heard = os.read(master, 4096)  # what the probe wrote: the pty keeps it
    finally:
        os.close(master)
        os.close(slave)
    assert lines(result) == [
        f"port: {link}, 115200 8N1",
        "no answer: nothing came back in 1 s to QUERY: is the device on, its cable in, and "
        "are TX and RX crossed (a null-modem cable)?",
    ]
    assert result.returncode == 4
    assert heard.startswith(b"$QUERY,0*8F46\r\n")  # it did ask


def test_a_device_at_another_baud_rate_is_garbage(tmp_path: Path) -> None:
    sim = Sim(tmp_path / "shuffler", "shuffler", "--game", "CSP", "--rounds", "0", "--baud", "9600")
    try:
        # 5 s: the device, never acknowledged, sends its HELLO again every 2 s
        # (link-layer.md), and the probe's QUERY reaches it as garbage.
        wrong = probe(sim.link, seconds=5)
        right = probe(sim.link, "--baudrate", "9600")
    finally:
        sim.stop()
    port, why = lines(wrong)
    assert port == f"port: {sim.link}, 115200 8N1"
    assert re.fullmatch(
        r"no answer: \d+ bytes came back in 5 s, no good frame: a wrong baud rate is likely "
        r"\(this port is at 115200 baud; try the device's: often 9600, 19200, 38400, 57600\), "
        r"or wrong parity or stop bits",
        why,
    ), why
    assert wrong.returncode == 5
    # The same device at its own rate answers: the garbage was the rate.
    assert lines(right)[1:3] == SHUFFLER_ANSWER
    assert right.returncode == 0


def test_a_missing_device(tmp_path: Path) -> None:
    result = probe(tmp_path / "ttyUSB9")
    assert lines(result) == [
        f"port: {tmp_path / 'ttyUSB9'}, 115200 8N1",
        f"no answer: no such port: {tmp_path / 'ttyUSB9'} does not exist (is the adapter "
        "plugged in? ls -l /dev/serial/by-id/ lists those that are)",
    ]
    assert result.returncode == 3


def test_a_port_the_table_holds(shuffler: Sim) -> None:
    with serial.Serial(str(shuffler.link), exclusive=True):  # as lammer run opens it
        result = probe(shuffler.link)
    assert lines(result) == [
        f"port: {shuffler.link}, 115200 8N1",
        f"no answer: {shuffler.link} is in use by another program (the table? stop it first: "
        "systemctl stop lammer@ID)",
    ]
    assert result.returncode == 3


def test_a_table_s_file_gives_the_port_and_the_device_expected(
    shuffler: Sim, tmp_path: Path
) -> None:
    config = tmp_path / "c1.toml"
    config.write_text(
        f'[table]\nid = "c1"\ngame = "CRAPS"\n[dice_reader]\nport = "{shuffler.link}"\n'
        f'[journal]\npath = "{tmp_path / "c1.db"}"\n'
    )
    result = probe("--config", config)
    port, answered, expected, mode, _, _ = lines(result)
    assert (port, answered, mode) == (
        f"port: {shuffler.link}, 115200 8N1",
        *SHUFFLER_ANSWER,
    )
    assert expected == "expected: a dice reader at this port"
    assert result.returncode == 6


def test_the_frames_it_holds_for_the_table_are_not_acknowledged(tmp_path: Path) -> None:
    script = tmp_path / "round.txt"
    script.write_text("DECK,OK\n")
    sim = Sim(tmp_path / "shuffler", "shuffler", "--game", "CSP", "--script", str(script))
    try:
        result = probe(sim.link)
    finally:
        sim.stop()
    acknowledged = sim.acknowledged()  # written when it stopped
    out = lines(result)
    assert out[1:3] == SHUFFLER_ANSWER
    assert out[-1] == (
        "waiting: the device holds a DECK frame for the table; the probe does not "
        "acknowledge it, so the table will receive it"
    )
    assert "DECK" not in acknowledged  # it is still the table's
    assert {"HELLO", "MODE"} <= set(acknowledged)


@pytest.mark.service  # ser2net
def test_through_a_device_server_speaking_rfc_2217(shuffler: Sim, tmp_path: Path) -> None:
    server = Ser2net(tmp_path, shuffler.link, "rfc2217")
    server.start()
    try:
        result = probe(server.url)
    finally:
        server.stop()
    port, *answer, _, line = lines(result)
    assert port == f"port: {server.url}, 115200 8N1 set by RFC 2217 on ser2net"
    assert answer == SHUFFLER_ANSWER
    assert line == CLEAN
    assert result.returncode == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "lammer probe: a PORT (or --config FILE) is required"),
        (("spy:///dev/ttyUSB0",), "lammer probe: URL scheme 'spy' is not supported"),
        (("/dev/ttyUSB0", "--rtscts", "--rs485"), "lammer probe: rs485 and rtscts cannot go"),
    ],
)
def test_bad_usage_is_status_2(args: tuple[str, ...], message: str) -> None:
    result = probe(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(message), result.stderr


def test_a_line_with_errors_answers_with_status_1(tmp_path: Path) -> None:
    # Half the transmissions with a bad CRC (NAKed), half after junk bytes (noise).
    faults = ("--fault", "crc=0.5,garbage=0.5")
    sim = Sim(tmp_path / "noisy", "shuffler", "--game", "CSP", "--rounds", "0", *faults)
    try:
        result = probe(sim.link, seconds=2)
    finally:
        sim.stop()
    *_, line = lines(result)
    assert re.fullmatch(
        r"line in 2 s: [1-9]\d* NAKs?, \d+ retransmissions?, [1-9]\d* bytes? of noise", line
    ), line
    assert lines(result)[1:3] == SHUFFLER_ANSWER
    assert result.returncode == 1
