"""Child processes that never outlive the process that started them (``lammer demo``).

A child started with ``Popen(..., **supervised())``:

* runs in a session of its own (unless ``own_session=False``), so the terminal's signals
  (Ctrl-C's SIGINT, a closed terminal's SIGHUP, Ctrl-Z) reach only its parent, which stops
  the children in the order they need (the daemons first, while the broker can still carry
  their ``offline``);
* is sent SIGTERM by the kernel when its parent dies, however it dies (SIGKILL, a crash):
  ``PR_SET_PDEATHSIG`` (prctl(2)), set between fork and exec. Linux only; elsewhere the
  first point holds alone.

``preexec_fn`` is safe here only because the demo starts its children from its main
thread while no other thread runs (subprocess's documentation): keep it that way.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable
from typing import Final, TypedDict

_PR_SET_PDEATHSIG: Final = 1  # <linux/prctl.h>


class SupervisedOptions(TypedDict):
    """The ``Popen`` keyword arguments of a supervised child."""

    start_new_session: bool
    preexec_fn: Callable[[], None] | None


def supervised(
    *, own_session: bool = True, death_signal: int = signal.SIGTERM
) -> SupervisedOptions:
    """``Popen`` options for a child that dies with us (sent ``death_signal``, SIGTERM
    unless the child wants another: PostgreSQL's fast shutdown is SIGINT) and, unless
    ``own_session`` is False (the demo's display, which the terminal's signals must reach),
    lives in a session of its own."""
    return {
        "start_new_session": own_session,
        "preexec_fn": _die_with(os.getpid(), death_signal),
    }


def _die_with(parent: int, death_signal: int) -> Callable[[], None] | None:
    if not sys.platform.startswith("linux"):
        return None
    # Loaded here, in the parent: the child between fork and exec only makes the call.
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def set_parent_death_signal() -> None:
        prctl(_PR_SET_PDEATHSIG, int(death_signal), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the call: no signal will come
            os._exit(1)

    return set_parent_death_signal
