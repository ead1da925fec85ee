"""Configuration files as every lammer program reads them: a TOML file whose problems are
sentences, and the files it names (relative to its folder, existing, private when secret).

* ``ConfigProblems``: a configuration that cannot be used, with every problem found
  (``key.path: what is wrong``; a problem of the file itself names ``(file)``). Each layer
  raises its own subclass (``daemon.errors.ConfigFileError``,
  ``display.errors.WebConfigError``), so its callers catch what they know.
* ``read_toml(path, error)``: the file's TOML, or ``error`` with one sentence: no such
  file, a directory, not UTF-8, unreadable, not valid TOML (with TOML's line and column).
* ``resolve``, ``existing_file``, ``private_file``: pydantic validators of a path that
  take a relative one from the configuration file's folder (``base_dir`` in the validation
  context), and check that it is a regular file, and only its owner's (``open_mode``).
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationInfo


class ConfigProblems(ValueError):
    """A configuration that cannot be used.

    ``path`` is the file (``None`` when validated from data), ``problems`` every problem
    found, each ``key.path: what is wrong`` (a file-level problem names no key).
    """

    def __init__(self, path: Path | None, problems: Sequence[str]) -> None:
        self.path = path
        self.problems: tuple[str, ...] = tuple(problems)
        where = str(path) if path is not None else "configuration"
        count = len(self.problems)
        header = f"{where}: {count} problem{'s' if count != 1 else ''}"
        super().__init__("\n  ".join([header, *self.problems]))


TYPE_PROBLEMS: Final[Mapping[str, str]] = {
    "int_type": "must be an integer",
    "bool_type": "must be true or false",
    "float_type": "must be a number",
    "string_type": "must be a string",
    "path_type": "must be a path string",
}
"""pydantic's error types of a value of the wrong type (strict fields), in an operator's
words; the caller adds what it got."""


def did_you_mean(key: str, keys: Iterable[str]) -> str:
    """``; did you mean 'name'?`` for the known key closest to an unknown ``key``, or ""."""
    close = difflib.get_close_matches(key, list(keys), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def read_toml(path: Path, error: type[ConfigProblems] = ConfigProblems) -> dict[str, Any]:
    """The TOML document of ``path``; ``error(path, [sentence])`` when it cannot be read."""
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise error(path, ["(file): no such file"]) from None
    except IsADirectoryError:
        raise error(path, ["(file): is a directory"]) from None
    except UnicodeDecodeError as exc:
        raise error(path, [f"(file): not UTF-8 text ({exc.reason})"]) from exc
    except OSError as exc:
        raise error(path, [f"(file): cannot read: {exc.strerror}"]) from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(path, [f"(file): not valid TOML: {exc}"]) from exc


def from_folder(value: Path, base: Path | None) -> Path:
    """``value`` with ``~`` expanded, taken from ``base`` when relative (and ``base`` given)."""
    value = value.expanduser()
    return base / value if base is not None and not value.is_absolute() else value


def resolve(value: Path, info: ValidationInfo) -> Path:
    """A relative path is relative to the configuration file's directory."""
    base = info.context.get("base_dir") if isinstance(info.context, dict) else None
    return from_folder(value, base if isinstance(base, Path) else None)


def existing_file(value: Path, info: ValidationInfo) -> Path:
    """``resolve``d, and an existing regular file (``ValueError`` otherwise)."""
    value = resolve(value, info)
    if not value.exists():
        raise ValueError(f"no such file: {value}")
    if not value.is_file():
        raise ValueError(f"not a regular file: {value}")
    return value


def open_mode(path: Path) -> int:
    """The permission bits of ``path`` that let its group or others in (0: private)."""
    return path.stat().st_mode & 0o077


def private_file(value: Path, info: ValidationInfo) -> Path:
    """An existing regular file only its owner may read or write (a password, a key)."""
    value = existing_file(value, info)
    if open_mode(value):
        # A secret others may read (or replace) is no secret: refuse it, as ssh does.
        mode = value.stat().st_mode & 0o777
        raise ValueError(
            f"must be readable by its owner only, got mode {mode:04o} "
            f"(group or others may read or write it): chmod 600 {value}"
        )
    return value
