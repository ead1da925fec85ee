"""``lammer-sim`` as a real subprocess: the pty path on stdout, exit statuses, seeds, scripts."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
from pathlib import Path

import pytest

from simulators.cli import build_parser
from simulators.scripts import Send, parse_script
from simulators.shuffler import ShufflerGame
from tests.simulators.host import ScriptedHost

_ENTRY = Path(sys.executable).parent / "lammer-sim"
COMMAND = [str(_ENTRY)] if _ENTRY.exists() else [sys.executable, "-m", "simulators.cli"]


async def start(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *COMMAND, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )


async def first_line(proc: asyncio.subprocess.Process) -> str:
    assert proc.stdout is not None
    async with asyncio.timeout(30):
        return (await proc.stdout.readline()).decode().strip()


async def finish(proc: asyncio.subprocess.Process) -> tuple[int, str]:
    async with asyncio.timeout(30):
        _, stderr = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, stderr.decode()


async def test_seeded_rounds_then_exit_0_with_a_record_that_replays(
    no_leaks: None, tmp_path: Path
) -> None:
    record = tmp_path / "record.txt"
    proc = await start(
        "shuffler", "--game", "MSP", "--rounds", "3", "--interval", "0", "--seed", "4",
        "--link", str(tmp_path / "shuffler"), "--record", str(record), "--ack-timeout", "0.05",
    )  # fmt: skip
    path = await first_line(proc)
    assert path.startswith("/dev/pts/")
    assert os.readlink(tmp_path / "shuffler") == path
    async with ScriptedHost("shuffler", path) as host:
        status, stderr = await finish(proc)
    assert status == 0, stderr
    assert not (tmp_path / "shuffler").exists(), "the symlink is removed on exit"
    assert "all frames acknowledged" in stderr
    # The seed reproduces the deal: the same frames as the game with that seed.
    expected = [
        str(s) for s in ShufflerGame("MSP", random.Random(4)).rounds(3) if isinstance(s, Send)
    ]
    played = [m for m in host.delivered if m.kind not in ("HELLO", "MODE")]
    assert [",".join((m.kind, *m.fields())) for m in played] == expected
    # No card at info level (shuffler-icd.md "Card data is secret until it is face up").
    hand = next(m for m in host.delivered if m.kind == "HAND")
    assert "".join(hand.fields()[-1:]) not in stderr
    # The record is a script of every acknowledged frame.
    replay = parse_script(record.read_text(), device="shuffler")
    assert [str(s) for s in replay] == [",".join((m.kind, *m.fields())) for m in host.delivered]


async def test_linger_keeps_serving_until_sigterm(no_leaks: None, tmp_path: Path) -> None:
    script = tmp_path / "rolls.txt"
    script.write_text(
        "# the dice-reader-icd.md example\nROLL,5001,6,5\nROLL,5002,2,2\nCHECK,5003,1,6,ON_CHIPS\n"
    )
    link = tmp_path / "dice"
    proc = await start("dice", "--script", str(script), "--linger", "--link", str(link))
    path = await first_line(proc)
    async with ScriptedHost("dice_reader", link) as host:
        delivered = await host.wait_for(4)
        assert [m.kind for m in delivered] == ["HELLO", "ROLL", "ROLL", "CHECK"]
        await asyncio.sleep(0.2)
        assert proc.returncode is None, "--linger: still serving"
        host.send(b"$QUERY,0*8F46\r\n")  # still answering
        await host.wait_for(5)
        proc.send_signal(signal.SIGTERM)
        status, stderr = await finish(proc)
    assert status == 0, stderr
    assert path.startswith("/dev/pts/")
    assert not link.is_symlink(), "the symlink is removed on exit"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["shuffler", "--game", "CSP", "--fault", "crc=2"], "not a probability"),
        (["shuffler", "--game", "CSP", "--fault", "gremlins=0.1"], "unknown fault 'gremlins'"),
        (["shuffler", "--game", "CSP", "--fault", "crc=0.1,drop_ack=1"], "never let a frame"),
        (["shuffler", "--game", "POKER"], "invalid choice: 'POKER'"),
        (["shuffler", "--rounds", "3"], "the following arguments are required: --game"),
        (["dice", "--check-rate", "2"], "not a probability"),
        (["dice", "--tcp", "70000"], "expected 0..65535"),
    ],
)
def test_bad_options_are_refused_by_the_parser(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        build_parser().parse_args(args)
    assert caught.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["dice", "--script", "{script}"], "line 2: 'HAND' is not a dice_reader message"),
        (["dice", "--link", "{precious}"], "exists and is not a symlink; refusing to replace it"),
    ],
)
async def test_bad_script_or_link_exit_2_with_the_reason(
    no_leaks: None, tmp_path: Path, args: list[str], message: str
) -> None:
    script = tmp_path / "bad.txt"
    script.write_text("ROLL,1,2,3\nHAND,1,P1,AsKs\n")
    precious = tmp_path / "ttyS0"
    precious.write_text("a real file")
    proc = await start(*(a.format(script=script, precious=precious) for a in args))
    status, stderr = await finish(proc)
    assert status == 2
    assert message in stderr
    assert precious.read_text() == "a real file"
