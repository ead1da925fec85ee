"""JSON as RFC 8259 has it, for what lammer reads off the wire.

Python's ``json`` accepts ``NaN``, ``Infinity`` and ``-Infinity``, which are not JSON: a
browser's ``JSON.parse`` refuses them, and a float that is not a number has no place in a
payload of money and odds. ``loads`` refuses them with a ``ValueError``.

The callers say what went wrong in their own words (a drop counter's reason, a request's
error answer); the errors to expect are ``ValueError`` (``json.JSONDecodeError``,
``UnicodeDecodeError`` for bytes that are not text, a constant refused) and
``RecursionError`` (nested too deeply).
"""

from __future__ import annotations

import json
from typing import Any


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(text: str | bytes) -> Any:
    """The value of a JSON document; ``NaN`` and ``Infinity`` refused (``ValueError``)."""
    return json.loads(text, parse_constant=_no_constant)
