"""Logging: structlog, JSON lines for machines, readable lines for people.

``configure_logging(fmt=..., level=...)`` once at start:

* ``fmt="auto"`` writes JSON lines unless the log stream is a terminal, where it writes
  readable console lines; ``"json"`` and ``"console"`` force one.
* Logs go to stderr, so a command's own output on stdout (``lammer journal``) stays clean;
  under systemd both streams go to the journal.
* No timestamps when the stream is connected to journald (``JOURNAL_STREAM`` names its
  device and inode; systemd.exec(5)): journald stamps every line itself.
* Context bound with ``bound_context(table=..., device=..., round=..., roll=...)`` (or
  ``structlog.contextvars.bind_contextvars``) appears on every line logged inside it.
* The standard library's ``logging`` (aiomqtt, asyncio) goes through the same renderer.

Card secrecy (shuffler-icd.md, "Card data is secret until it is face up"): at info and
above, the values of keys that may hold cards or raw frames (``SECRET_KEYS``) are
replaced by ``"<hidden>"``; only debug shows them, and tracebacks never show local
variables. This is a safety net: callers still must not put hidden cards in the event
text itself.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import fields, is_dataclass
from datetime import datetime
from decimal import Decimal
from enum import Enum
from fractions import Fraction
from typing import Any, Final, Literal, TextIO

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

LogFormat = Literal["auto", "json", "console"]

LEVELS: Final[dict[str, int]] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}

SECRET_KEYS: Final[frozenset[str]] = frozenset(
    {"card", "cards", "hand", "hands_cards", "hole_card", "dealer_cards", "frame", "raw", "body"}
)
"""Keys whose values are hidden at info and above (they may hold a card face down)."""

HIDDEN: Final = "<hidden>"

_IDS: Final = {"round_id": "round", "roll_id": "roll"}


def event_context(event: object) -> dict[str, Any]:
    """Log context of a fact, decision or outcome: the round or the roll it belongs to."""
    return {
        key: value
        for name, key in _IDS.items()
        if (value := getattr(event, name, None)) is not None
    }


def _plain(value: object) -> object:
    """A value as JSON holds it, never a Python repr: lists for tuples, objects for
    dataclasses and mappings, exact decimals and fractions as strings (``"80"``, ``"1/3"``),
    times in ISO 8601, enums by their value."""
    match value:
        case str() | int() | bool() | None:
            return value
        case Decimal():
            return format(value, "f")
        case Fraction():
            return f"{value.numerator}/{value.denominator}"
        case datetime():
            return value.isoformat()
        case Enum():
            return _plain(value.value)
        case tuple() | list() | frozenset() | set():
            items = [_plain(v) for v in value]
            return sorted(items, key=str) if isinstance(value, frozenset | set) else items
        case Mapping():
            return {str(k): _plain(v) for k, v in value.items()}
        case _ if is_dataclass(value) and not isinstance(value, type):
            return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    return str(value)


def fact_fields(fact: object) -> dict[str, Any]:
    """The fields of a device fact that may be logged at info: never a card
    (shuffler-icd.md, "Card data is secret until it is face up"). Cards reach the log only
    as a count; the other ``SECRET_KEYS`` not at all; the ids are ``event_context``'s."""
    fields: dict[str, Any] = {}
    for name in getattr(fact, "__dataclass_fields__", {}):
        if name in _IDS:
            continue
        if name == "cards":
            fields["card_count"] = len(getattr(fact, name))
        elif name not in SECRET_KEYS:
            fields[name] = _plain(getattr(fact, name))
    return fields


def outcome_fields(outcome: object) -> dict[str, Any]:
    """The fields of an outcome, every one: outcomes are published, so what they carry is
    already public (a flagged result carries no card)."""
    return {
        name: _plain(getattr(outcome, name))
        for name in getattr(outcome, "__dataclass_fields__", {})
    }


def _fallback(value: object) -> object:
    """What structlog's JSON renderer writes for a value JSON has no type for."""
    try:
        return value.__structlog__()  # type: ignore[attr-defined]
    except AttributeError:
        return repr(value)


_JSON: Final = json.JSONEncoder(default=_fallback)


def _render_json(value: object, **_options: object) -> str:
    """``json.dumps`` for structlog's renderer, with one encoder made once (``dumps`` with
    a ``default`` makes an encoder per line; a device frame logs two or three)."""
    return _JSON.encode(value)


def hide_secrets(_logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
    """structlog processor: hide ``SECRET_KEYS`` values unless logged at debug."""
    if method != "debug":
        for key in SECRET_KEYS & event.keys():
            event[key] = HIDDEN
    return event


def under_journald(stream: TextIO) -> bool:
    """True when ``stream`` is the journald stream systemd named in ``JOURNAL_STREAM``."""
    value = os.environ.get("JOURNAL_STREAM", "")
    device, _, inode = value.partition(":")
    if not device.isdigit() or not inode.isdigit():
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return st.st_dev == int(device) and st.st_ino == int(inode)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (ValueError, AttributeError):
        return False


def configure_logging(  # structlog and logging set up as one
    *, fmt: LogFormat, level: str, stream: TextIO | None = None
) -> Literal["json", "console"]:
    """Set up structlog and the standard library's logging; returns the format chosen.

    ``level`` is ``debug``, ``info``, ``warning``, ``error`` or ``critical`` (any case).
    ``stream`` defaults to ``sys.stderr``. Raises ``ValueError`` for an unknown level or
    format. Safe to call again (tests, reconfiguration).
    """
    number = LEVELS.get(level.lower())
    if number is None:
        raise ValueError(f"unknown log level {level!r}: expected one of {', '.join(LEVELS)}")
    if fmt not in ("auto", "json", "console"):
        raise ValueError(f"unknown log format {fmt!r}: expected auto, json or console")
    out = stream if stream is not None else sys.stderr
    chosen: Literal["json", "console"] = (
        fmt if fmt != "auto" else ("console" if _is_terminal(out) else "json")
    )

    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        hide_secrets,
    ]
    if not under_journald(out):
        shared.append(structlog.processors.TimeStamper(fmt="iso", utc=True))
    # The structlog chain is the same for every format, so a logger bound before a
    # reconfiguration still renders; the format lives only in the handler's formatter.
    final: list[Processor] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    # Tracebacks never show local variables: a local may hold a card still face down.
    if chosen == "json":
        tracebacks = structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
        final += [
            structlog.processors.ExceptionRenderer(tracebacks),
            structlog.processors.JSONRenderer(serializer=_render_json),
        ]
    else:
        terminal = _is_terminal(out)
        console = structlog.dev.ConsoleRenderer(
            colors=terminal,
            exception_formatter=(
                structlog.dev.RichTracebackFormatter(show_locals=False)
                if terminal
                else structlog.dev.plain_traceback
            ),
        )
        final.append(console)

    # lammer's own lines are rendered by structlog and written straight to the stream
    # (a quarter of the CPU of a device frame went into the standard library's logging
    # machinery); the standard library's own loggers (aiomqtt, asyncio) still go through
    # a handler with the same processors.
    structlog.configure(
        processors=[*shared, *final[1:]],
        wrapper_class=structlog.make_filtering_bound_logger(number),
        logger_factory=structlog.WriteLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared], processors=final
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_lammer", False):
            root.removeHandler(old)
    handler._lammer = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(number)
    return chosen


def get_logger(name: str | None = None, **context: Any) -> Any:
    """A lazy logger with ``context`` bound (``device="shuffler"``); it follows the
    configuration in force when it logs, so module-level loggers are fine."""
    return structlog.get_logger(name, **context)


@contextmanager
def bound_context(**context: Any) -> Iterator[None]:
    """Bind ``table``, ``device``, ``round``, ``roll``, ... to every line logged inside
    (contextvars: follows asyncio tasks started inside)."""
    with structlog.contextvars.bound_contextvars(**context):
        yield


_Line = tuple[Any, str, str, dict[str, Any]]


class _Hold:
    """The lines a ``TxLog`` and the loggers bound from it hold (None: not holding)."""

    __slots__ = ("lines",)

    def __init__(self) -> None:
        self.lines: list[_Line] | None = None


class TxLog:
    """A bound logger whose lines can wait for the journal transaction they are logged in
    (``held``): a transaction the journal refuses is tried again, and its lines would say
    twice what did not happen. Outside ``held`` a line goes out at once."""

    def __init__(self, logger: Any, hold: _Hold | None = None) -> None:
        self._logger = logger
        self._hold = hold if hold is not None else _Hold()

    def bind(self, **fields: Any) -> TxLog:
        """More context, as structlog's ``bind`` (holding with this one)."""
        return TxLog(self._logger.bind(**fields), self._hold)

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold the lines logged inside (by this logger and those bound from it): out when
        the block ends, dropped when it raises. Inside another hold, the outer one decides."""
        hold = self._hold
        if hold.lines is not None:
            yield
            return
        hold.lines = []
        try:
            yield
        except BaseException:
            hold.lines = None
            raise
        lines, hold.lines = hold.lines, None
        for logger, level, event, context in lines:
            getattr(logger, level)(event, **context)

    def _emit(self, level: str, event: str, fields: dict[str, Any]) -> None:
        if self._hold.lines is not None:
            self._hold.lines.append((self._logger, level, event, fields))
        else:
            getattr(self._logger, level)(event, **fields)

    def debug(self, event: str, **fields: Any) -> None:
        """As structlog's."""
        self._emit("debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        """As structlog's."""
        self._emit("info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        """As structlog's."""
        self._emit("warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        """As structlog's."""
        self._emit("error", event, fields)
