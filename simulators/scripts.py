"""What a simulated device does, step by step, and the script format that spells it out.

Honest play (``simulators.shuffler``, ``simulators.dice``) and scripts read from a file
produce the same steps, so a dispute can be reproduced exactly by writing the frames of a
round into a script:

* ``Send``: one device-to-host frame body *without* its sequence number, such as
  ``HAND,812,P1,9c9d5h5s2c``; the device link numbers it (link-layer.md "Sequence
  numbers") and sends it stop-and-wait.
* ``Sleep``: the table pauses (pacing).
* ``Wait``: the device pauses until a file exists: a cue from outside (a test that must
  do something, kill the host say, before the next frame goes out), an event rather than
  a time. The link goes on meanwhile (``QUERY`` answered, the frame in flight resent).
* ``Unplug``: the device's line goes away and comes back (a USB unplug and replug).
* ``DropAck``: the first ACK of the next frame is lost on the wire, so the device sends
  the frame again after its ACK timeout (a deterministic ``drop_ack`` fault, for tests and
  for reproducing a dispute).

Script format (UTF-8 text, one step a line)::

    # a comment; blank lines are ignored, and so is anything after " #"
    HELLO,IDEAL-SIM,2.1.0,SN0001     (optional: the simulator says HELLO at power-up anyway)
    MODE,CSP
    DECK,OK
    HAND,812,P1,9c9d5h5s2c
    sleep 0.5                         (seconds, a decimal number >= 0)
    ROUND,812,1
    unplug                            (close the port and open a new one, see serve.py)
    drop_ack                          (the next frame's first ACK is lost: it is sent again)
    wait /run/cue/next-hand           (until a file exists at that path, however long)

Every frame line is checked when the script is loaded, with the drivers' own codec
(``drivers.messages.parse_body``), and must be a message of the scripted device: a
``ROLL`` in a shuffler script is an error, as is a card ``1x``. Errors name the file's line.

The simulators' errors (one base for the layer)::

    SimulatorError(Exception)
    ├── ScriptError(SimulatorError, ValueError)       a script line that is not a step
    └── FaultSpecError(SimulatorError, ValueError)    a --fault setting that does not parse
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from drivers.errors import FrameError
from drivers.messages import SENT_BY, DeviceMessage, parse_body
from rules.events import Device

DeviceKind = Device
"""``shuffler`` or ``dice_reader`` (the event model's names)."""


class SimulatorError(Exception):
    """Base of every error raised by the simulators."""


class ScriptError(SimulatorError, ValueError):
    """A script line that is not a step; ``line`` is 1-based, ``text`` the line as written."""

    def __init__(self, message: str, *, line: int, text: str) -> None:
        super().__init__(message)
        self.line = line
        self.text = text


class FaultSpecError(SimulatorError, ValueError):
    """A fault setting (``--fault crc=0.1,...``) that does not parse; ``item`` is the bad part."""

    def __init__(self, message: str, *, item: str) -> None:
        super().__init__(message)
        self.item = item


@dataclass(frozen=True, slots=True)
class Send:
    """One device-to-host frame, as its body fields without the sequence number."""

    fields: tuple[str, ...]

    @classmethod
    def of(cls, kind: str, *fields: object) -> Send:
        """``Send.of("ROLL", 5001, 6, 5)``: the fields are written with ``str``."""
        return cls((kind, *(str(f) for f in fields)))

    @property
    def kind(self) -> str:
        """The message type, e.g. ``HAND``."""
        return self.fields[0]

    def body(self, seq: int) -> str:
        """The frame body with ``seq`` in its place (the second field, link-layer.md "Frames")."""
        return ",".join((self.fields[0], str(seq), *self.fields[1:]))

    def message(self, seq: int, device: DeviceKind) -> DeviceMessage:
        """The typed message, checked by the drivers' codec. Raises ``FrameError``."""
        return parse_body(self.body(seq), device=device, sender="device")

    def __str__(self) -> str:
        return ",".join(self.fields)


@dataclass(frozen=True, slots=True)
class Sleep:
    """A pause of ``seconds`` (pacing; scripts use it to reproduce a table's timing)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Wait:
    """A pause until a file exists at ``path`` (an event, not a time: a test's cue).

    ``path`` is taken as written (relative to the simulator's working directory); it is
    the rest of the line after ``wait``, spaces included, up to a comment (`` #``).
    """

    path: Path


@dataclass(frozen=True, slots=True)
class Unplug:
    """The line goes away and comes back: a new pty behind the ``--link`` symlink, and any
    TCP client dropped. The device says ``HELLO`` again afterwards (shuffler-icd.md)."""


@dataclass(frozen=True, slots=True)
class DropAck:
    """The first ACK of the next frame is lost on the wire: the device retransmits it."""


Step = Send | Sleep | Wait | Unplug | DropAck

_SLEEP = re.compile(r"sleep\s+(\d+(?:\.\d+)?)")


def parse_step(text: str, *, device: DeviceKind, line: int = 1) -> Step | None:
    """One script line as a step, or None for a blank or comment line.

    Raises ``ScriptError`` naming the line and what is wrong with it.
    """
    stripped = text.split(" #", 1)[0].strip()
    if not stripped or stripped.startswith("#"):
        return None
    lowered = stripped.lower()
    if lowered.split()[0] == "sleep":
        match = _SLEEP.fullmatch(lowered)
        if match is None:
            raise ScriptError(
                f"line {line}: {stripped!r}: expected 'sleep SECONDS' with SECONDS a number >= 0",
                line=line,
                text=text,
            )
        return Sleep(float(match.group(1)))
    if lowered.split()[0] == "wait":
        target = stripped[len("wait") :].strip()
        if not target:
            raise ScriptError(
                f"line {line}: {stripped!r}: expected 'wait PATH' (a file to wait for)",
                line=line,
                text=text,
            )
        return Wait(Path(target))
    if lowered == "unplug":
        return Unplug()
    if lowered == "drop_ack":
        return DropAck()
    fields = tuple(stripped.split(","))
    kind = fields[0]
    if kind not in SENT_BY[device]:
        allowed = ", ".join(sorted(SENT_BY[device]))
        raise ScriptError(
            f"line {line}: {kind!r} is not a {device} message (expected one of {allowed}, "
            "'sleep SECONDS', 'wait PATH', 'unplug' or 'drop_ack'; frame bodies are written "
            "without the sequence number)",
            line=line,
            text=text,
        )
    step = Send(fields)
    try:
        step.message(1, device)
    except FrameError as exc:
        raise ScriptError(f"line {line}: {stripped!r}: {exc}", line=line, text=text) from exc
    return step


def parse_script(text: str, *, device: DeviceKind) -> list[Step]:
    """Every step of a script (see the module docstring). Raises ``ScriptError``."""
    steps: list[Step] = []
    for number, line in enumerate(text.splitlines(), start=1):
        step = parse_step(line, device=device, line=number)
        if step is not None:
            steps.append(step)
    return steps


def load_script(path: Path, *, device: DeviceKind) -> list[Step]:
    """Read and parse a script file. Raises ``ScriptError`` (or ``OSError`` if unreadable)."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ScriptError(
            f"line {line}: byte {data[exc.start]:#04x} of {path} is not UTF-8 text",
            line=line,
            text=data.splitlines()[line - 1].decode("utf-8", errors="replace"),
        ) from exc
    return parse_script(text, device=device)


def format_script(steps: Iterable[Step]) -> str:
    """Write steps in the script format (so a simulated run can be replayed as a script)."""
    lines: list[str] = []
    for step in steps:
        match step:
            case Send():
                lines.append(str(step))
            case Sleep(seconds):
                lines.append(f"sleep {seconds:.6f}".rstrip("0").rstrip("."))
            case Wait(path):
                lines.append(f"wait {path}")
            case Unplug():
                lines.append("unplug")
            case DropAck():
                lines.append("drop_ack")
    return "".join(line + "\n" for line in lines)
