"""Strict JSON (foundation.strict_json): what Python's json accepts and JSON does not."""

from __future__ import annotations

import pytest

from foundation import strict_json


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_numbers_json_has_not_are_refused(constant: str) -> None:
    with pytest.raises(ValueError, match=f"{constant} is not JSON"):
        strict_json.loads(f'{{"x": {constant}}}'.encode())


def test_json_is_read_from_text_or_bytes() -> None:
    assert strict_json.loads('{"a": [1, 2.5, null]}') == {"a": [1, 2.5, None]}
    assert strict_json.loads(b'{"a": "\xc3\xa9"}') == {"a": "é"}
    with pytest.raises(UnicodeDecodeError):  # a ValueError, as JSONDecodeError is
        strict_json.loads(b'{"a": "\xff"}')
