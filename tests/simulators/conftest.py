"""Fixtures of the simulator tests (none autouse: they are asked for by name)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import pytest


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _describe(fds: set[str]) -> list[str]:
    return [os.path.realpath(f"/proc/self/fd/{fd}") for fd in sorted(fds)]


@pytest.fixture
async def no_leaks() -> AsyncIterator[None]:
    """Fail the test if it leaves a task running or a file descriptor open.

    Ask for it first, so it is set up before, and checked after, every other fixture.
    """
    tasks = asyncio.all_tasks()
    fds = _open_fds()
    yield
    leaked_tasks: set[asyncio.Task[object]] = set()
    leaked_fds: set[str] = set()
    for _ in range(100):  # closing transports finish on the next loop iterations
        leaked_tasks = asyncio.all_tasks() - tasks - {asyncio.current_task()}
        leaked_fds = _open_fds() - fds
        if not leaked_tasks and not leaked_fds:
            break
        await asyncio.sleep(0.01)
    assert not leaked_tasks, f"leaked tasks: {leaked_tasks}"
    assert not leaked_fds, f"leaked fds: {_describe(leaked_fds)}"
