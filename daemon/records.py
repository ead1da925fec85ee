"""Events as journal records and back.

``to_record(obj)`` turns a registered dataclass (every dataclass of ``rules/events.py``,
and the table's state for snapshots, ``daemon.replay``) into a JSON object: ``{"type":
"HandDealt", "round_id": 812, "position": "P1", "cards": ["9c", ...]}``;
``from_record(record)`` gives the equal object back. Values:

* ``None``, ``bool``, ``int``, ``str`` as they are;
* ``Decimal`` as its exact string (``"1.5"``: odds are never floats, mqtt-api.md);
* ``datetime`` as ISO 8601 (``isoformat()``, offset kept; naive stays naive);
* tuples and lists as arrays, frozensets as sorted arrays, and a
  ``rules.persistent.PersistentQueue`` (the rolls waiting in a craps state) as the array
  of its items;
* nested dataclasses as records with their own ``type``.

These are the types the events have; anything else is refused, so a new field type is a
decision made here, with its test, not a silent guess.

Decoding follows the dataclass's type hints (``Literal`` values are checked, ``int``
never accepts ``true``), so a record that does not fit raises ``RecordError`` naming the
place (``HandDealt.cards[2]``) instead of building a wrong event.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

import rules.events
from daemon.errors import RecordError
from rules.persistent import PersistentQueue

T = TypeVar("T")

TYPE_KEY = "type"

_BY_NAME: dict[str, type[Any]] = {}
_HINTS: dict[type[Any], tuple[tuple[str, Any], ...]] = {}
_NAMES: dict[type[Any], str] = {}
_DEFAULTED: dict[type[Any], frozenset[str]] = {}
"""Per record type, the fields that have a default (a record may omit them)."""


def register(cls: type[T], *, name: str | None = None) -> type[T]:
    """Make a dataclass (and the dataclasses its fields hold) known to the records.

    Usable as a decorator. ``name`` (default the class name) is the record's ``type``;
    it must be unique. Raises ``RecordError`` for a class that is not a dataclass, has a
    field named ``type``, or whose name is taken by another class.
    """
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise RecordError(f"{cls!r} is not a dataclass")
    key = name or cls.__name__
    known = _BY_NAME.get(key)
    if known is cls:
        return cls
    if known is not None:
        raise RecordError(f"record type {key!r} is already {known.__module__}.{known.__name__}")
    fields = {f.name for f in dataclasses.fields(cls)}
    if TYPE_KEY in fields:
        raise RecordError(f"{cls.__name__} has a field named {TYPE_KEY!r}, which records use")
    try:
        hints = typing.get_type_hints(cls)
    except NameError as exc:
        raise RecordError(f"{cls.__name__}: cannot resolve its type hints: {exc}") from exc
    _BY_NAME[key] = cls
    _HINTS[cls] = tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))
    _DEFAULTED[cls] = frozenset(
        f.name
        for f in dataclasses.fields(cls)
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    )
    _NAMES[cls] = key
    for _, hint in _HINTS[cls]:
        for nested in _dataclasses_in(hint):
            register(nested)
    return cls


def registered() -> Mapping[str, type[Any]]:
    """Every registered record type by name."""
    return types.MappingProxyType(_BY_NAME)


def _dataclasses_in(hint: Any) -> list[type[Any]]:
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return [hint]
    return [d for arg in typing.get_args(hint) for d in _dataclasses_in(arg)]


# ---------------------------------------------------------------------------------------
# Encoding


def to_record(obj: object) -> dict[str, object]:
    """The JSON object of a registered event. Raises ``RecordError`` for anything else
    (an unregistered class, a value of an unsupported type, a non-finite number)."""
    cls = type(obj)
    if cls not in _NAMES:
        raise RecordError(f"{cls.__module__}.{cls.__name__} is not a registered record type")
    out: dict[str, object] = {TYPE_KEY: _NAMES[cls]}
    for name, _ in _HINTS[cls]:
        out[name] = _encode(getattr(obj, name), f"{cls.__name__}.{name}")
    return out


def _encode(value: object, path: str) -> object:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise RecordError(f"not a finite decimal: {value}", path=path)
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, PersistentQueue):  # the rolls waiting in a craps state
        return [_encode(item, f"{path}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, tuple | list):
        return [_encode(item, f"{path}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, frozenset):
        # Sorted, so that equal sets are equal records (snapshots compare as JSON).
        return [_encode(item, f"{path}[{i}]") for i, item in enumerate(sorted(value))]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_record(value)
    raise RecordError(f"cannot store a {type(value).__name__}: {value!r}", path=path)


# ---------------------------------------------------------------------------------------
# Decoding


def from_record(record: Mapping[str, object]) -> Any:
    """The event a ``to_record`` object stands for. Raises ``RecordError`` for an unknown
    ``type``, a missing or unknown field, or a value that does not fit its field."""
    if not isinstance(record, Mapping):
        raise RecordError(f"a record is a JSON object, got {type(record).__name__}")
    name = record.get(TYPE_KEY)
    if not isinstance(name, str) or name not in _BY_NAME:
        raise RecordError(f"unknown record type {name!r}")
    cls = _BY_NAME[name]
    hints = _HINTS[cls]
    known = {field for field, _ in hints}
    extra = sorted(set(record) - known - {TYPE_KEY})
    if extra:
        raise RecordError(f"unknown field(s) {', '.join(extra)}", path=name)
    values: dict[str, Any] = {}
    for field, hint in hints:
        if field not in record:
            if field in _DEFAULTED[cls]:
                # A field added later with a default (Alarm.acknowledged_by): a record
                # written before it reads as the default, so older journals still replay.
                continue
            raise RecordError("missing", path=f"{name}.{field}")
        values[field] = _decode(record[field], hint, f"{name}.{field}")
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:
        raise RecordError(str(exc), path=name) from exc


def _fail(value: object, expected: str, path: str) -> RecordError:
    return RecordError(f"expected {expected}, got {value!r}", path=path)


def _decode(value: object, hint: Any, path: str) -> Any:  # noqa: C901  one branch per kind of type hint a record field may have
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any or hint is object:
        return value
    if hint is None or hint is type(None):
        if value is not None:
            raise _fail(value, "null", path)
        return None
    if origin in (typing.Union, types.UnionType):
        return _decode_union(value, args, path)
    if origin is typing.Literal:
        for option in args:
            if value == option and type(value) is type(option):
                return option
        raise _fail(value, "one of " + ", ".join(repr(a) for a in args), path)
    if origin is PersistentQueue:
        if not isinstance(value, list):
            raise _fail(value, "an array", path)
        item = args[0] if args else Any
        return PersistentQueue(_decode(v, item, f"{path}[{i}]") for i, v in enumerate(value))
    if origin in (tuple, list):
        if not isinstance(value, list):
            raise _fail(value, "an array", path)
        if origin is list or (len(args) == 2 and args[1] is Ellipsis):
            item = args[0] if args else Any
            items = [_decode(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
        else:
            if len(value) != len(args):
                raise _fail(value, f"an array of {len(args)}", path)
            items = [
                _decode(v, a, f"{path}[{i}]")
                for i, (v, a) in enumerate(zip(value, args, strict=True))
            ]
        return tuple(items) if origin is tuple else items
    if origin is frozenset:
        if not isinstance(value, list):
            raise _fail(value, "an array", path)
        item = args[0] if args else Any
        return frozenset(_decode(v, item, f"{path}[{i}]") for i, v in enumerate(value))
    if isinstance(hint, type):
        decoder = _DECODERS.get(hint)
        if decoder is not None:
            return decoder(value, path)
        if dataclasses.is_dataclass(hint):
            if not isinstance(value, dict):
                raise _fail(value, f"a {hint.__name__} record", path)
            obj = from_record(value)
            if not isinstance(obj, hint):
                raise _fail(value.get(TYPE_KEY), f"a {hint.__name__} record", path)
            return obj
    raise RecordError(f"unsupported field type {hint!r}", path=path)


def _decode_union(value: object, args: tuple[Any, ...], path: str) -> Any:
    if value is None and type(None) in args:
        return None
    # The first member that fits wins; a nested record names its own type, so a union
    # of dataclasses decodes to the right one.
    for option in args:
        if option is type(None):
            continue
        try:
            return _decode(value, option, path)
        except RecordError:
            continue
    raise _fail(value, " or ".join(_hint_name(a) for a in args), path)


def _hint_name(hint: Any) -> str:
    if hint is type(None):
        return "null"
    return getattr(hint, "__name__", None) or str(hint)


def _int(value: object, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(value, "an integer", path)
    return value


def _bool(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(value, "true or false", path)
    return value


def _str(value: object, path: str) -> str:
    if not isinstance(value, str):
        raise _fail(value, "a string", path)
    return value


def _decimal(value: object, path: str) -> Decimal:
    if not isinstance(value, str):
        raise _fail(value, "a decimal string", path)
    try:
        number = Decimal(value)
    except InvalidOperation:
        raise _fail(value, "a decimal string", path) from None
    if not number.is_finite():
        raise _fail(value, "a finite decimal", path)
    return number


def _datetime(value: object, path: str) -> datetime:
    if not isinstance(value, str):
        raise _fail(value, "an ISO 8601 time", path)
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise _fail(value, "an ISO 8601 time", path) from None


_DECODERS: dict[type[Any], Callable[[object, str], Any]] = {
    int: _int,
    bool: _bool,
    str: _str,
    Decimal: _decimal,
    datetime: _datetime,
}


def _register_events() -> None:
    for value in vars(rules.events).values():
        if (
            isinstance(value, type)
            and dataclasses.is_dataclass(value)
            and value.__module__ == rules.events.__name__
        ):
            register(value)


_register_events()
