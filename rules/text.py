"""Words every part of lammer prints: a count with its noun in the right number.

Here because every package imports ``rules`` and nothing else is shared by all of them;
pure, like the rest of ``rules``.
"""

from __future__ import annotations


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """``count`` and its noun: ``plural(1, "hand")`` is ``"1 hand"``, ``plural(3, "hand")``
    ``"3 hands"``, ``plural(0, "hand")`` ``"0 hands"``; ``plural_form`` for an irregular noun.
    Thousands are grouped (``"1,024 tables"``)."""
    noun = singular if count == 1 else (plural_form or f"{singular}s")
    return f"{count:,} {noun}"
