"""The electronic dice reader simulator: honest rolls from an injected RNG.

``DiceGame`` turns a ``random.Random`` into the steps of one throw after another
(dice-reader-icd.md); no I/O, so a run is reproduced from its seed. Each throw gets the
next roll id (1 to 999999, then 1 again) and is:

* ``NOROLL`` with probability ``noroll_rate``: ``OFF_TABLE`` (68 IAC 10-4-4(b)(1)) or
  ``EXTRA_DICE`` ((b)(2)), evenly;
* else ``CHECK`` with probability ``check_rate``: one of the reasons the reader can see
  under 4-4(c) evenly: ``STACKED`` (1), ``BOWL`` (4), ``RAIL`` (5), ``WRONG_DIRECTION``
  (7), ``SLID`` (8), ``ON_CHIPS`` (9), ``SHORT_THROW`` (10), ``UNREADABLE`` (11). The dice
  are read as usual, except under ``UNREADABLE``, where one die or both are 0;
* else ``ROLL`` with two fair dice.

The ``status`` fault puts a ``STATUS`` fault code (``CAMERA_FAULT`` or ``COVER_OPEN``)
and ``STATUS,READY`` before a throw.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from rules.events import CHECK_REASONS, MAX_ID, NOROLL_REASONS
from simulators.faults import Faults, hit
from simulators.scripts import Send, Sleep, Step
from simulators.shuffler import next_id

DICE_FAULT_CODES = ("CAMERA_FAULT", "COVER_OPEN")  # dice-reader-icd.md "STATUS"


class DiceGame:
    """A craps table's throws, drawn from ``rng``; ``interval`` seconds after each (0: none)."""

    def __init__(
        self,
        rng: random.Random,
        *,
        noroll_rate: float = 0.0,
        check_rate: float = 0.0,
        faults: Faults | None = None,
        interval: float = 0.0,
        first_roll: int = 1,
    ) -> None:
        for name, rate in (("noroll rate", noroll_rate), ("check rate", check_rate)):
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{name} {rate} is not a probability between 0 and 1")
        if not 1 <= first_roll <= MAX_ID:
            raise ValueError(f"roll id {first_roll}: expected 1 to {MAX_ID}")
        if interval < 0:
            raise ValueError(f"interval {interval}: expected seconds >= 0")
        self.rng = rng
        self.noroll_rate = noroll_rate
        self.check_rate = check_rate
        self.faults = faults or Faults()
        self.interval = interval
        self.roll_id = first_roll

    def rolls(self, count: int | None = None) -> Iterator[Step]:
        """The steps of ``count`` throws (forever when None)."""
        thrown = 0
        while count is None or thrown < count:
            yield from self.next_roll()
            thrown += 1

    def _die(self) -> int:
        return self.rng.randint(1, 6)

    def next_roll(self) -> list[Step]:
        """The steps of the next throw."""
        steps: list[Step] = []
        if hit(self.faults.status, self.rng):
            code = self.rng.choice(DICE_FAULT_CODES)
            steps += [
                Send.of("STATUS", code, code.lower().replace("_", " ")),
                Send.of("STATUS", "READY", ""),
            ]
        rid = self.roll_id
        if hit(self.noroll_rate, self.rng):
            steps.append(Send.of("NOROLL", rid, self.rng.choice(NOROLL_REASONS)))
        elif hit(self.check_rate, self.rng):
            reason = self.rng.choice(CHECK_REASONS)
            dice = [self._die(), self._die()]
            if reason == "UNREADABLE":
                # 4-4(c)(11): a face that cannot be determined is reported as 0.
                for index in self.rng.choice(((0,), (1,), (0, 1))):
                    dice[index] = 0
            steps.append(Send.of("CHECK", rid, dice[0], dice[1], reason))
        else:
            steps.append(Send.of("ROLL", rid, self._die(), self._die()))
        if self.interval > 0:
            steps.append(Sleep(self.interval))
        self.roll_id = next_id(self.roll_id)
        return steps
