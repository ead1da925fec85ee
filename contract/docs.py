"""The tables of ``docs/reference/mqtt.md``, generated from the contract's declarations.

``docs/reference/mqtt.md`` is prose a person writes around tables the contract writes: each
table stands between two markers::

    <!-- contract: state -->
    | field | |
    ...
    <!-- /contract -->

``tables()`` gives the text of every table by name (``published``: the topic table; a
topic: its fields; ``requests``: the requests); ``update(text)`` puts them between their
markers, and ``python -m contract.docs docs/reference/mqtt.md`` (``make schemas``) writes the
file. A test fails when the file is stale. A field's row is its ``description``, its values
where it has a closed set, and ``(1.1)`` or ``(**added**)`` after a field the spec's 1.1
or lammer added.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel

from contract.payloads import ADDED, TOPICS, Envelope
from contract.requests import REQUEST_MODELS, ResponseMessage

ENVELOPE: Final = frozenset({"table", "seq", "ts"})
"""Fields every payload has, described once under "Conventions"."""

EXPANDED: Final = {("alarms", "alarms"): "[]", ("info", "paytables"): ""}
"""Fields whose own fields get rows of their own (``alarms[].code``, ``paytables.cover_all``)."""

AVAILABILITY: Final = (
    "`online` when connected; `offline` at a clean stop, as the will when the daemon dies, "
    "and while the daemon runs but its journal refuses to write (a full disk: it can keep "
    "no record, so nothing pays)"
)
"""``availability`` (plain text, no model) in the topic table."""

_MARKER = re.compile(r"(<!-- contract: ([a-z_/]+) -->\n)(.*?)(<!-- /contract -->)", re.S)


def _values(schema: dict[str, Any]) -> list[Any]:
    """The closed set of values of a field's schema, if it has one."""
    if "enum" in schema:
        return list(schema["enum"])
    if "const" in schema:
        return [schema["const"]]
    out: list[Any] = []
    for alternative in schema.get("anyOf", []):
        out.extend(_values(alternative))
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _name(name: str, schema: dict[str, Any]) -> str:
    added = schema.get("x-added")
    if added == ADDED:
        return f"`{name}` (**added**)"
    if added is not None:
        return f"`{name}` ({added})"
    return f"`{name}`"


def _row_text(schema: dict[str, Any]) -> str:
    text = schema.get("description", "")
    values = [v for v in _values(schema) if v is not None]
    if values and not all(f"{v}" in text for v in values):
        listed = " ".join(f"`{v}`" for v in values)
        text = f"{text}: {listed}" if text else listed
    return _cell(text)


def _field_rows(model: type[BaseModel], topic: str) -> list[str]:
    schema = model.model_json_schema(mode="serialization")
    defs = schema.get("$defs", {})
    rows = []
    for name, field in schema["properties"].items():
        if name in ENVELOPE:
            continue
        rows.append(f"| {_name(name, field)} | {_row_text(field)} |")
        joiner = EXPANDED.get((topic, name))
        if joiner is None:
            continue
        inner = _inner_model(model, name)
        inner_schema = inner.model_json_schema(mode="serialization", ref_template="{model}")
        for sub, sub_field in inner_schema["properties"].items():
            resolved = defs.get(sub_field.get("$ref", ""), sub_field)
            rows.append(
                f"| {_name(f'{name}{joiner}.{sub}', sub_field)} "
                f"| {_row_text({**resolved, **sub_field})} |"
            )
    return rows


def _inner_model(model: type[BaseModel], name: str) -> type[BaseModel]:
    """The model a field holds (itself, or the items of its list)."""
    annotation: Any = model.model_fields[name].annotation
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    raise TypeError(f"{model.__name__}.{name} holds no model")  # pragma: no cover


def _published() -> list[str]:
    rows = ["| topic under base | retained | when |", "|---|---|---|"]
    rows.append(f"| `availability` | yes | {AVAILABILITY} |")
    for topic, (model, retained) in TOPICS.items():
        when = getattr(model, "WHEN", "")
        added = " (**added**)" if topic in ("info",) else ""
        added = " (1.1)" if topic == "craps/reversal" else added
        rows.append(f"| `{topic}`{added} | {'yes' if retained else 'no'} | {_cell(when)} |")
    rows.append(f"| `response/<name>` | no | {_cell(ResponseMessage.WHEN)} |")
    return rows


def _requests() -> list[str]:
    rows = ["| name | fields | effect |", "|---|---|---|"]
    for name, model in REQUEST_MODELS.items():
        schema = model.model_json_schema(mode="validation")
        fields = []
        for field_name, field in schema["properties"].items():
            if field_name in ("operator", "request_id"):
                continue
            values = _values(field)
            if values:
                named = [f"`{v}`" for v in values]
                shown = " or ".join(filter(None, (", ".join(named[:-1]), named[-1])))
                fields.append(f"`{field_name}` ({shown})")
            elif field_name != "roll_id" and "description" in field:
                fields.append(f"`{field_name}` ({field['description'].split(' (')[0]})")
            else:
                fields.append(f"`{field_name}`")
        effect = getattr(model, "EFFECT", None) or _first_paragraph(model.__doc__ or "")
        rows.append(f"| `{name}` | {', '.join(fields)} | {_cell(effect)} |")
    return rows


def _first_paragraph(docstring: str) -> str:
    """A model's docstring after its topic (``request/x``: ...), as Markdown."""
    text = docstring.split(":", 1)[-1].strip().split("\n\n")[0]
    return " ".join(text.split()).replace("``", "`")


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models a field of this type may hold (itself, in a list, a dict or a union)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in getattr(annotation, "__args__", ()) for m in _models_in(arg)]


def _declared_by(model: type[BaseModel], name: str) -> type:
    """The class of ``model``'s bases that declares field ``name`` (``Envelope``'s
    ``prev_seq`` is every topic's)."""
    for cls in model.__mro__:
        if name in inspect.get_annotations(cls):
            return cls
    return model


def _since(version: str) -> str:
    return "lammer" if version == ADDED else f"mqtt-api.md {version}"


def _added_rows(
    model: type[BaseModel], where: str, path: str, seen: set[tuple[type, str]]
) -> list[str]:
    """A row per field (and value) of ``model`` and the models it holds that carries an
    ``x-added`` (``x-added-values``), each declaration once (the first topic naming it)."""
    rows: list[str] = []
    for name, info in model.model_fields.items():
        owner = _declared_by(model, name)
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if (owner, name) not in seen:
            seen.add((owner, name))
            place = "every payload" if owner is Envelope else f"`{where}`"
            added = extra.get("x-added")
            if isinstance(added, str):
                text = _cell(info.description or "")
                rows.append(f"| {place} | `{path}{name}` | {_since(added)} | {text} |")
            values = extra.get("x-added-values")
            for value, version in (values if isinstance(values, dict) else {}).items():
                since = _since(str(version))
                rows.append(f"| {place} | `{path}{name}`: `{value}` | {since} | a new value |")
        for inner in _models_in(info.annotation):
            rows += _added_rows(inner, where, f"{path}{name}.", seen)
    return rows


def _additions() -> list[str]:
    """lammer's additions to mqtt-api.md version 1 and the spec's own later ones, from the
    one declaration of each (a topic's ``TOPIC_ADDED``, a field's ``x-added``)."""
    rows = ["| where | topic or field | since | |", "|---|---|---|---|"]
    seen: set[tuple[type, str]] = set()
    for topic, (model, _) in TOPICS.items():
        if model.TOPIC_ADDED is not None:
            body = next(c for c in model.__mro__ if "TOPIC_ADDED" in c.__dict__)
            text = _cell(_first_paragraph(body.__doc__ or ""))
            rows.append(f"| `{topic}` | the topic | {_since(model.TOPIC_ADDED)} | {text} |")
        rows += _added_rows(model, topic, "", seen)
    rows += _added_rows(ResponseMessage, "response/<name>", "", seen)
    return rows


def tables() -> dict[str, str]:
    """Every generated table of docs/reference/mqtt.md by marker name: ``published``, ``requests``,
    ``additions``, and one per topic (``state``, ``craps/board``, ``response``)."""
    out = {"published": _published(), "requests": _requests(), "additions": _additions()}
    for topic, (model, _) in TOPICS.items():
        out[topic] = ["| field | |", "|---|---|", *_field_rows(model, topic)]
    out["response"] = ["| field | |", "|---|---|", *_field_rows(ResponseMessage, "response")]
    return {name: "\n".join(rows) + "\n" for name, rows in out.items()}


def update(text: str) -> str:
    """``text`` (docs/reference/mqtt.md) with every marked table as the contract declares it.

    Raises ``KeyError`` for a marker naming no table, ``ValueError`` when a table has no
    marker (the document would not name a topic)."""
    generated = tables()
    seen: set[str] = set()

    def replace(match: re.Match[str]) -> str:
        name = match.group(2)
        seen.add(name)
        return match.group(1) + generated[name] + match.group(4)

    result = _MARKER.sub(replace, text)
    missing = sorted(set(generated) - seen)
    if missing:
        raise ValueError(f"docs/reference/mqtt.md has no marker for {missing}")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m contract.docs FILE``: write the tables into FILE, say if it changed."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m contract.docs docs/reference/mqtt.md", file=sys.stderr)
        return 2
    path = Path(args[0])
    text = path.read_text(encoding="utf-8")
    new = update(text)
    if new == text:
        print(f"{path} up to date")
    else:
        path.write_text(new, encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
