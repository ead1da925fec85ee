"""foundation.tasks: the running task, or a clear error outside one."""

from __future__ import annotations

import asyncio

import pytest

from foundation.tasks import this_task


def test_a_coroutine_gets_its_own_task() -> None:
    async def main() -> bool:
        return this_task() is asyncio.current_task()

    assert asyncio.run(main())


def test_a_loop_callback_has_no_task() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[BaseException | None] = loop.create_future()

        def callback() -> None:
            try:
                this_task()
            except RuntimeError as exc:
                done.set_result(exc)
            else:
                done.set_result(None)

        loop.call_soon(callback)
        error = await done
        assert isinstance(error, RuntimeError)
        assert "not a loop callback" in str(error)

    asyncio.run(main())


def test_outside_a_loop_it_raises() -> None:
    with pytest.raises(RuntimeError):
        this_task()
