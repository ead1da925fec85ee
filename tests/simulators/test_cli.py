"""``lammer-sim`` as a real subprocess: the pty path on stdout, exit statuses, seeds, scripts."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from simulators.cli import build_parser
from simulators.scripts import Send, parse_script
from simulators.shuffler import ShufflerGame
from tests.conftest import CLI_BOUND_S
from tests.simulators.host import ScriptedHost

ROOT = Path(__file__).resolve().parents[2]
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


@pytest.mark.heavy
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


@pytest.mark.heavy
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
        await asyncio.sleep(0.2)  # the window in which it would exit: the check
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


@pytest.mark.heavy
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


@pytest.mark.heavy
def test_version_is_the_installed_package_version() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    result = subprocess.run(
        [*COMMAND, "--version"], capture_output=True, text=True, timeout=CLI_BOUND_S, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"lammer-sim {version}\n"


@pytest.mark.heavy
async def test_record_is_for_its_owner_only_and_replaces_an_earlier_one(
    no_leaks: None, tmp_path: Path
) -> None:
    script = tmp_path / "rolls.txt"
    script.write_text("ROLL,5001,6,5\nROLL,5002,2,2\n")
    record = tmp_path / "record.txt"
    record.write_text("an earlier record, readable by all\n")
    record.chmod(0o644)
    link = tmp_path / "dice"
    # Under umask 000 a plain open() would make the record 0666.
    proc = await asyncio.create_subprocess_exec(
        "bash", "-c", 'umask 000 && exec "$@"', "-", *COMMAND,
        "dice", "--script", str(script), "--link", str(link), "--record", str(record),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    await first_line(proc)
    async with ScriptedHost("dice_reader", link):
        status, stderr = await finish(proc)
    assert status == 0, stderr
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert [line for line in record.read_text().splitlines() if line.startswith("ROLL")] == [
        "ROLL,5001,6,5",
        "ROLL,5002,2,2",
    ]
    assert sorted(os.listdir(tmp_path)) == ["record.txt", "rolls.txt"]  # no temporary left


@pytest.mark.heavy
async def test_record_that_is_a_symlink_is_refused_at_start(no_leaks: None, tmp_path: Path) -> None:
    theirs = tmp_path / "theirs.txt"
    theirs.write_text("not yours\n")
    record = tmp_path / "record.txt"
    record.symlink_to(theirs)
    proc = await start("dice", "--rolls", "1", "--record", str(record))
    status, stderr = await finish(proc)
    assert status == 2
    assert "a symlink or not a regular file; refusing it" in stderr
    assert theirs.read_text() == "not yours\n"


@pytest.mark.heavy
@pytest.mark.parametrize("piped", ["stdout", "stdout and stderr"])
async def test_piped_to_head_it_keeps_serving_without_a_traceback(
    no_leaks: None, tmp_path: Path, piped: str
) -> None:
    # The first line reaches head, which exits; each unplug then prints a new pty path
    # (and logs) into the closed pipe. The device must go on serving its host.
    script = tmp_path / "rolls.txt"
    script.write_text("ROLL,5001,6,5\nunplug\nROLL,5002,2,2\nunplug\nROLL,5003,1,1\n")
    link, first, errors, status = (tmp_path / name for name in ("dice", "first", "err", "status"))
    sim = " ".join([*COMMAND, "dice", "--script", str(script), "--link", str(link)])
    redirect = "2>&1" if piped == "stdout and stderr" else f"2> {errors}"
    pipeline = f'{sim} {redirect} | head -1 > {first}; echo "${{PIPESTATUS[0]}}" > {status}'
    proc = await asyncio.create_subprocess_exec("bash", "-c", pipeline)
    try:
        async with asyncio.timeout(30):
            while True:  # until head has its line (and so has exited) and the pty is up
                if first.exists() and first.read_text() and link.is_symlink():
                    break
                await asyncio.sleep(0.02)
        async with ScriptedHost("dice_reader", link) as host:
            delivered = await host.wait_for(6)
            async with asyncio.timeout(30):
                await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert [m.kind for m in delivered] == ["HELLO", "ROLL"] * 3  # HELLO after each replug
    assert host.opens == 3  # it was unplugged twice while nobody read its output
    assert status.read_text() == "0\n"  # played to the end and exited normally
    assert len(first.read_text().splitlines()) == 1
    if piped == "stdout":
        text = errors.read_text()
        assert "Traceback" not in text
        assert "BrokenPipeError" not in text
        assert text.count("unplugged") == 2
