"""Stopping the asyncio tasks of an MQTT client for sure, on every side of the contract.

``task.cancel()`` asks once, and Python 3.11 can lose the request: ``asyncio.wait_for``
returns its inner result instead of raising ``CancelledError`` when the awaited future
completes in the same loop iteration as the cancellation (CPython gh-86296, fixed in 3.12),
and aiomqtt waits for every CONNACK, SUBACK, PUBACK and DISCONNECT that way. A task that
reconnects forever then never ends, and a process that gathers it at shutdown never exits:
``lammer web`` outlived a SIGKILLed ``lammer demo`` by more than 90 s on a loaded machine
(the kernel's SIGTERM, ``PR_SET_PDEATHSIG``, arrived while its links were busy with the
dying broker). Hence two things, used by every lammer process with MQTT links:

* ``cancel_and_wait`` cancels again until the tasks have ended, within a bound;
* ``exit_after`` arms a last resort when a stop begins: a process still alive after its
  bound says so on stderr and exits 70 (``EX_SOFTWARE``). Only for processes whose state
  is safe at any instant (the displays, the web server, the records service, whose writes
  are transactions); the table daemon stops through its journal and is bounded by systemd's
  ``TimeoutStopSec``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import Iterable
from typing import Any, Final

STOP_DEADLINE_S: Final = 20.0
"""Seconds a stopping process has before ``exit_after`` ends it (a stop takes well under
one: pages closed, links disconnected within their own 2 to 5 s bounds)."""

EXIT_STUCK: Final = 70
"""The exit status of a stop that did not finish in time (sysexits.h's ``EX_SOFTWARE``)."""


async def cancel_and_wait(
    tasks: Iterable[asyncio.Task[Any]], *, within: float = 10.0, every: float = 0.5
) -> set[asyncio.Task[Any]]:
    """Cancel ``tasks`` until each has ended, asking again every ``every`` s (a lost
    cancellation is asked again), for at most ``within`` s; the tasks still running then
    (none, unless one ignores cancellation outright). The ended tasks' errors are retrieved
    (no "exception was never retrieved"), not raised: the caller reads them if it cares."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    every_task = list(tasks)
    pending = {task for task in every_task if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        left = deadline - loop.time()
        if left <= 0:
            break
        _, pending = await asyncio.wait(pending, timeout=min(every, left))
    for task in every_task:
        if task.done() and not task.cancelled():
            task.exception()
    return pending


def exit_after(seconds: float, program: str) -> threading.Thread:
    """Arm the last resort of a stop that has begun: if this process still runs after
    ``seconds``, write one line on stderr and exit ``EXIT_STUCK`` at once (``os._exit``:
    no cleanup can hang it). A daemon thread, so a prompt stop is never delayed by it."""

    def stuck() -> None:
        time.sleep(seconds)
        sys.stderr.write(
            f"{program}: did not stop within {seconds:g} s of being asked to; exiting anyway\n"
        )
        sys.stderr.flush()
        os._exit(EXIT_STUCK)

    thread = threading.Thread(target=stuck, name=f"{program} stop deadline", daemon=True)
    thread.start()
    return thread
