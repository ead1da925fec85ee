"""Every topic of the MQTT contract in one registry, and its JSON Schemas for display teams.

``model_for(topic)`` and ``parse_message(topic, payload)`` know every topic the daemon
publishes (``contract.payloads.TOPICS`` and ``response/<name>``); ``schemas()`` gives a JSON
Schema (draft 2020-12) per topic and per request, and ``write_schemas(folder)`` writes them
as files, one per topic (``docs/schemas/cover_all/result.json``). The files in
``docs/schemas/`` are generated: ``python -m contract.schemas docs/schemas`` (``make
schemas``) writes them again, and a test fails when they are stale.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from contract.payloads import TOPICS, PayloadModel
from contract.requests import REQUEST_MODELS, ResponseMessage

DRAFT: Final = "https://json-schema.org/draft/2020-12/schema"


def model_for(topic: str) -> tuple[type[PayloadModel], bool]:
    """The message model and the retained flag of a topic relative to the base topic.

    ``response/<name>`` for any name (an unknown request name is answered there too).
    Raises ``KeyError`` naming the topic when it is not one the daemon publishes.
    """
    if topic.startswith("response/") and topic.count("/") == 1 and len(topic) > 9:
        return ResponseMessage, False
    try:
        return TOPICS[topic]
    except KeyError:
        raise KeyError(f"not a topic of mqtt-api.md: {topic!r}") from None


def parse_message(topic: str, payload: bytes) -> PayloadModel:
    """Validate a published payload against its topic's model (for tests and tools).

    Raises ``KeyError`` for an unknown topic, ``pydantic.ValidationError`` for a bad payload.
    """
    model, _ = model_for(topic)
    return model.model_validate_json(payload)


def _open_for_additions(node: Any) -> Any:
    # The spec lets the daemon add fields ("add topics and fields freely"), so a display
    # must not reject a payload for an unknown key: drop additionalProperties: false.
    if isinstance(node, dict):
        return {
            k: _open_for_additions(v)
            for k, v in node.items()
            if not (k == "additionalProperties" and v is False)
        }
    if isinstance(node, list):
        return [_open_for_additions(v) for v in node]
    return node


def _absent_allowed(node: Any) -> Any:
    # A field marked x-absent may be left out (mode of a device that is not the shuffler):
    # every other key is always present (docs/reference/mqtt.md, Conventions).
    if isinstance(node, dict):
        out = {k: _absent_allowed(v) for k, v in node.items()}
        properties = out.get("properties")
        if isinstance(properties, dict) and "required" in out:
            out["required"] = [
                name for name in out["required"] if "x-absent" not in properties.get(name, {})
            ]
        return out
    if isinstance(node, list):
        return [_absent_allowed(v) for v in node]
    return node


def _published(topic: str, model: type[PayloadModel], retained: bool) -> dict[str, Any]:
    schema = _absent_allowed(_open_for_additions(model.model_json_schema(mode="serialization")))
    schema["$schema"] = DRAFT
    schema["title"] = topic
    schema["description"] = f"mqtt-api.md topic <base>/{topic}" + (
        " (retained)" if retained else ""
    )
    schema["x-retained"] = retained
    return dict(schema)


def schemas() -> dict[str, dict[str, Any]]:
    """JSON Schema (draft 2020-12) of every payload, keyed by topic relative to the base
    topic: the published topics (``availability`` included, plain text), the responses
    (``response/<name>``) and the requests (``request/<name>``). Plain JSON, needing
    nothing of lammer to use."""
    result: dict[str, dict[str, Any]] = {
        "availability": {
            "$schema": DRAFT,
            "title": "availability",
            "description": "plain text, not JSON: online, or offline (also the will message)",
            "type": "string",
            "enum": ["online", "offline"],
        }
    }
    for topic, (model, retained) in TOPICS.items():
        result[topic] = _published(topic, model, retained)
    for name in REQUEST_MODELS:
        result[f"response/{name}"] = _published(f"response/{name}", ResponseMessage, False)
    for name, request_model in REQUEST_MODELS.items():
        schema = request_model.model_json_schema(mode="validation")
        schema["$schema"] = DRAFT
        schema["title"] = f"request/{name}"
        schema["description"] = f"mqtt-api.md request <base>/request/{name}"
        result[f"request/{name}"] = schema
    return result


def schema_files() -> dict[str, str]:
    """The schema files as ``write_schemas`` writes them: relative path -> text."""
    return {
        f"{topic}.json": json.dumps(schema, indent=2, sort_keys=True) + "\n"
        for topic, schema in schemas().items()
    }


def write_schemas(folder: Path) -> list[str]:
    """Write every schema under ``folder`` (``folder/cover_all/result.json``); return the
    relative paths whose content changed. Files of topics that no longer exist are left
    for a person to remove (the test of the files names them)."""
    changed: list[str] = []
    for relative, text in schema_files().items():
        path = folder / relative
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        changed.append(relative)
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m contract.schemas FOLDER``: write the JSON Schemas, say what changed."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m contract.schemas FOLDER", file=sys.stderr)
        return 2
    changed = write_schemas(Path(args[0]))
    for relative in changed:
        print(f"wrote {Path(args[0]) / relative}")
    if not changed:
        print("schemas up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
