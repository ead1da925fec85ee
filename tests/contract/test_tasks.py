"""contract.tasks: tasks that stop although a cancellation is lost, and a stop's last resort."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

from contract.tasks import EXIT_STUCK, cancel_and_wait


async def test_a_cancellation_lost_to_wait_for_is_asked_again() -> None:
    # What aiomqtt's reconnect loops do: wait for an acknowledgement through asyncio.wait_for,
    # forever. On Python 3.11 a cancellation in the same loop iteration as the
    # acknowledgement is dropped (gh-86296); a single cancel() then never ends the loop.
    loop = asyncio.get_running_loop()
    acks: list[asyncio.Future[int]] = []
    rounds = 0

    async def reconnecting() -> None:
        nonlocal rounds
        while True:
            ack = loop.create_future()
            acks.append(ack)
            await asyncio.wait_for(ack, timeout=60)
            rounds += 1

    task = asyncio.create_task(reconnecting())
    await asyncio.sleep(0)  # it runs up to its first wait
    assert len(acks) == 1
    acks[-1].set_result(1)  # the acknowledgement and the stop, in one iteration
    assert await cancel_and_wait([task], within=5) == set()
    assert task.cancelled()


async def test_a_task_that_catches_cancellation_once_is_stopped() -> None:
    swallowed = 0

    async def stubborn() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if swallowed:
                    raise
                swallowed += 1

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    assert await cancel_and_wait([task], within=5, every=0.05) == set()
    assert swallowed == 1
    assert task.cancelled()


async def test_a_task_that_never_stops_is_returned_after_the_bound() -> None:
    release = asyncio.Event()

    async def deaf() -> None:
        while not release.is_set():
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                continue

    task = asyncio.create_task(deaf())
    await asyncio.sleep(0)
    assert await cancel_and_wait([task], within=0.3, every=0.05) == {task}
    release.set()
    task.cancel()
    await asyncio.wait([task])


async def test_errors_of_ended_tasks_are_retrieved_not_raised() -> None:
    async def fails() -> None:
        raise ValueError("boom")

    task = asyncio.create_task(fails())
    await asyncio.sleep(0)
    assert await cancel_and_wait([task]) == set()
    assert isinstance(task.exception(), ValueError)


def _python(code: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_a_stop_that_hangs_ends_the_process_with_one_line() -> None:
    done = _python(
        """
        import threading
        from contract.tasks import exit_after
        exit_after(0.2, "lammer web")
        threading.Event().wait()  # a stop that never finishes
        """
    )
    assert done.returncode == EXIT_STUCK
    said = "lammer web: did not stop within 0.2 s of being asked to; exiting anyway\n"
    assert done.stderr == said


def test_a_prompt_stop_is_not_held_by_the_deadline() -> None:
    done = _python(
        """
        from contract.tasks import exit_after
        exit_after(600, "lammer web")
        print("stopped")
        """,
        timeout=60,  # far below the deadline's 600 s: the thread does not keep it alive
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "stopped\n", "")
