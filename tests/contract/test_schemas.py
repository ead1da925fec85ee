"""The JSON Schemas in docs/schemas/ are the payload models' (contract/schemas.py), and what
a display team reads there matches what the daemon publishes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contract.schemas import main, model_for, schema_files, write_schemas

DOCS = Path(__file__).resolve().parents[2] / "docs" / "schemas"


def test_the_schema_files_in_docs_are_up_to_date() -> None:
    expected = schema_files()
    on_disk = {p.relative_to(DOCS).as_posix(): p for p in DOCS.rglob("*.json")}
    stale = [
        name
        for name, text in expected.items()
        if name not in on_disk or on_disk[name].read_text(encoding="utf-8") != text
    ]
    extra = sorted(set(on_disk) - set(expected))
    assert not stale, f"stale schemas {stale}: run `make schemas` and commit docs/schemas"
    assert not extra, f"schemas of topics that are gone: {extra}"


def test_every_schema_file_is_json_schema_of_a_topic() -> None:
    for name, text in schema_files().items():
        schema = json.loads(text)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        topic = name.removesuffix(".json")
        assert schema["title"] == topic
        if not topic.startswith(("request/", "availability")):
            _, retained = model_for(topic)
            assert schema["x-retained"] is retained
            assert set(schema["required"]) >= {"table", "seq", "ts"}


def test_writing_again_changes_nothing_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = write_schemas(tmp_path)
    assert "cover_all/result.json" in first
    assert (tmp_path / "info.json").is_file()
    assert write_schemas(tmp_path) == []
    (tmp_path / "state.json").write_text("{}", encoding="utf-8")
    assert main([str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {tmp_path / 'state.json'}"
    assert main([]) == 2


def test_docs_reference_mqtt_md_names_every_topic_and_every_field() -> None:
    # docs/reference/mqtt.md is what display teams read: a topic or a field the daemon publishes
    # that it does not name is a contract nobody can find.
    text = (DOCS.parent / "reference" / "mqtt.md").read_text(encoding="utf-8")
    for name, schema_text in schema_files().items():
        topic = name.removesuffix(".json")
        if topic.startswith(("response/", "request/")):
            assert f"`{topic.split('/')[1]}`" in text, topic
        else:
            assert f"`{topic}`" in text, topic
        for field in json.loads(schema_text).get("properties", {}):
            assert f"`{field}`" in text, (topic, field)
