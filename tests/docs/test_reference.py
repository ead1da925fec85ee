"""The generated references (docs/reference/) are current and complete: every
configuration key, command option, topic, request, alarm code and health field is in them,
each with a meaning written where the code declares it (cli/reference.py)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

from cli.reference import PAGES, command_parsers, main, options
from contract.payloads import TOPICS
from contract.requests import REQUEST_MODELS
from daemon.config import TableConfig
from display.web.config import WebConfig
from display.web.server import HEALTH_FIELDS
from rules.alarms import ALARMS

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference"


def read(name: str) -> str:
    return (REFERENCE / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(PAGES))
def test_the_generated_page_is_current(name: str) -> None:
    assert read(name) == PAGES[name](), (
        f"docs/reference/{name} is stale: run `make reference` and commit it"
    )


def _section_model(annotation: Any) -> type[BaseModel] | None:
    """The model of a section key (``X`` or ``X | None``), or None for a plain key."""
    if get_origin(annotation) in (Union, UnionType):
        models = [_section_model(a) for a in get_args(annotation)]
        return next((m for m in models if m is not None), None)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def model_keys(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, str | None]]:
    """``(dotted key, description)`` of every key of ``model``, read from the model's own
    fields (not from the JSON Schema the generator reads)."""
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        section = _section_model(field.annotation)
        if section is not None:
            yield from model_keys(section, f"{path}.")
        else:
            yield path, field.description


@pytest.mark.parametrize("model", [TableConfig, WebConfig], ids=["table", "web"])
def test_every_configuration_key_is_in_the_reference_with_its_meaning(
    model: type[BaseModel],
) -> None:
    text = read("configuration.md")
    keys = list(model_keys(model))
    assert len(keys) > 20  # the walk reached every section's keys
    for path, description in keys:
        assert description, f"{model.__name__} {path}: no description (its meaning)"
        assert f"| `{path}` |" in text, f"{path} is missing from docs/reference/configuration.md"


def command_sections() -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
    """Every command, its parser, and its section of commands.md."""
    text = read("commands.md")
    for name, parser in command_parsers():
        start = text.index(f"## `{name}`\n")
        end = text.find("\n## ", start + 1)
        yield name, parser, text[start : end if end > 0 else len(text)]


def test_every_command_and_option_is_in_the_reference_with_its_help() -> None:
    seen = 0
    for name, parser, section in command_sections():
        for action in options(parser):
            assert action.help, f"{name} {action.option_strings or action.dest}: no help"
            for option in action.option_strings or [str(action.metavar or action.dest)]:
                assert f"`{option}`" in section, f"{name} {option} missing from commands.md"
                seen += 1
    assert seen > 100  # lammer's and lammer-sim's options, subcommands included
    commands = {name for name, _, _ in command_sections()}
    assert {"lammer run", "lammer journal", "lammer web adduser", "lammer-sim dice"} <= commands


def test_every_topic_and_request_is_in_the_mqtt_reference() -> None:
    text = read("mqtt.md")
    for topic in TOPICS:
        assert f"`{topic}`" in text, topic
    for request in REQUEST_MODELS:
        assert f"| `{request}` |" in text, request


def test_every_alarm_code_is_in_the_reference_with_when_it_clears() -> None:
    text = read("alarms.md")
    for kind in ALARMS:
        row = next(line for line in text.splitlines() if line.startswith(f"| `{kind.code}` |"))
        assert " ".join(kind.cleared.replace("|", "\\|").split()) in row


def test_every_health_field_is_in_the_reference() -> None:
    text = read("metrics.md")
    for field, meaning in HEALTH_FIELDS.items():
        assert meaning
        assert f"| `{field}` |" in text, field


def test_main_writes_the_stale_pages_and_says_which(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "alarms.md").write_text(read("alarms.md"), encoding="utf-8")
    (tmp_path / "commands.md").write_text("stale\n", encoding="utf-8")
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{tmp_path / 'alarms.md'} up to date" in out
    assert f"wrote {tmp_path / 'commands.md'}" in out
    for name in PAGES:
        assert (tmp_path / name).read_text(encoding="utf-8") == read(name)
    assert main([]) == 2
