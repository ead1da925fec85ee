"""The task a coroutine runs in, typed: asyncio runs every coroutine in a task, but
``asyncio.current_task()`` is typed ``Task | None`` for a callback, which runs in none."""

from __future__ import annotations

import asyncio
from typing import Any


def this_task() -> asyncio.Task[Any]:
    """The task running the calling coroutine (``RuntimeError`` from a plain callback)."""
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("no task: this_task() is for a coroutine, not a loop callback")
    return task
