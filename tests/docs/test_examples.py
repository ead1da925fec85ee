"""What the docs show a reader to type is what the program accepts: every `lammer` and
`lammer-sim` command line of a fenced ``sh`` block parses with the command's own parser,
and every table configuration of a fenced ``toml`` block validates."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.main import build_parser
from daemon.config import validate_config
from simulators.cli import build_parser as build_sim_parser

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
PROGRAMS = {"lammer": build_parser, "lammer-sim": build_sim_parser}
"""A command line's program, by the last part of its path (``/opt/lammer/bin/lammer``)."""


def fenced(text: str, language: str) -> Iterator[tuple[int, str]]:
    """``(line, body)`` of every fenced block of ``language`` (indented ones included)."""
    for match in re.finditer(rf"^( *)```{language}\n(.*?)^\1```", text, re.M | re.S):
        body = "\n".join(line.removeprefix(match.group(1)) for line in match[2].splitlines())
        yield text.count("\n", 0, match.start()) + 1, body


def commands(block: str) -> Iterator[list[str]]:
    """The simple commands of a shell block: continuations joined, comments dropped, split
    at ``&&``, ``;`` and ``|``, environment assignments before the program left out."""
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        command: list[str] = []
        for word in [*words, ";"]:
            if word in ("&&", "||", ";", "|"):
                while command and re.fullmatch(r"[A-Z_]+=.*", command[0]):
                    command.pop(0)
                if command:
                    yield command
                command = []
            else:
                command.append(word)


def shown_command_lines() -> list[tuple[str, list[str]]]:
    found = []
    for page in PAGES:
        for line, block in fenced(page.read_text(encoding="utf-8"), "sh"):
            for argv in commands(block):
                if Path(argv[0]).name in PROGRAMS:
                    found.append((f"{page.relative_to(ROOT)}:{line}", argv))
    return found


SHOWN = shown_command_lines()


def test_the_docs_show_command_lines_to_check() -> None:
    # The installation's, the broker's, the floor's, the screens' and the records' steps.
    assert len(SHOWN) >= 10
    assert {argv[1] for _, argv in SHOWN} >= {"check-config", "broker-config", "floor-config"}


@pytest.mark.parametrize(("where", "argv"), SHOWN, ids=[w for w, _ in SHOWN])
def test_a_command_line_the_docs_show_is_one_the_parser_accepts(
    where: str, argv: list[str]
) -> None:
    parser: argparse.ArgumentParser = PROGRAMS[Path(argv[0]).name]()
    stderr = io.StringIO()
    status: int | str | None = 0
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(argv[1:])
    except SystemExit as exc:  # argparse's refusal (2), or --version and --help (0)
        status = exc.code
    assert status == 0, f"{where}: {shlex.join(argv)}\n{stderr.getvalue()}"


def shown_configurations() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for line, block in fenced(page.read_text(encoding="utf-8"), "toml"):
            if re.search(r"^\[table\]", block, re.M):
                found.append((f"{page.relative_to(ROOT)}:{line}", block))
    return found


CONFIGURATIONS = shown_configurations()


@pytest.mark.parametrize(("where", "text"), CONFIGURATIONS, ids=[w for w, _ in CONFIGURATIONS])
def test_a_table_configuration_the_docs_show_validates(
    where: str, text: str, tmp_path: Path
) -> None:
    data = tomllib.loads(text)
    # The files it names exist where the example says, readable by their owner only.
    for section in data.values():
        for key, value in section.items() if isinstance(section, dict) else ():
            if key.endswith("_file"):
                path = tmp_path / value
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("a password\n")
                path.chmod(0o600)
    config = validate_config(data, base_dir=tmp_path)
    assert config.table.id == data["table"]["id"], where


def test_the_docs_show_a_configuration_of_each_kind() -> None:
    games = {tomllib.loads(text)["table"]["game"] for _, text in CONFIGURATIONS}
    assert {"UTH", "CRAPS"} <= games


def environment(path: Path) -> dict[str, str]:
    """An EnvironmentFile's assignments (comments and blank lines left out)."""
    found: dict[str, str] = {}
    for line in path.read_text().splitlines():
        name, equals, value = line.partition("=")
        if equals and not name.startswith("#"):
            found[name] = value
    return found


def unit_command_lines() -> list[tuple[str, list[str]]]:
    """Every ``lammer`` command line systemd runs from the units, as systemd expands it:
    ``%i`` the instance, ``${X}`` one word, ``$X`` split at spaces (systemd.service(5))."""
    found = []
    env: dict[str, str] = {}
    for path in sorted((ROOT / "systemd").glob("*.env")):  # records', authenticate's
        env.update(environment(path))
    for unit in sorted((ROOT / "systemd").glob("*.service")):
        text = unit.read_text().replace("\\\n", " ")
        for line in re.findall(r"^ExecStart(?:Pre)?=(.*)$", text, re.M):
            words: list[str] = []
            for word in shlex.split(line.replace("%i", "poker1")):
                if (name := re.fullmatch(r"\$\{(\w+)\}", word)) is not None:
                    words.append(env[name[1]])
                elif (name := re.fullmatch(r"\$(\w+)", word)) is not None:
                    words += env[name[1]].split()
                else:
                    words.append(word)
            if Path(words[0]).name in PROGRAMS:
                found.append((unit.name, words))
    return found


UNITS = unit_command_lines()


@pytest.mark.parametrize(("unit", "argv"), UNITS, ids=[" ".join(a[1:3]) for _, a in UNITS])
def test_a_command_line_a_unit_runs_is_one_the_parser_accepts(unit: str, argv: list[str]) -> None:
    assert len(UNITS) >= 5  # lammer@'s check and run, lammer-web, -records, -authenticate
    parser: argparse.ArgumentParser = PROGRAMS[Path(argv[0]).name]()
    stderr = io.StringIO()
    status: int | str | None = 0
    try:
        with contextlib.redirect_stderr(stderr):
            parser.parse_args(argv[1:])
    except SystemExit as exc:
        status = exc.code
    assert status == 0, f"{unit}: {shlex.join(argv)}\n{stderr.getvalue()}"
