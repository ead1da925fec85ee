"""Filling the records from the tables' journals (sans-IO: ``now`` is passed in).

The feed (``contract.feed``) starts a table it sees for the first time at the first live
message, and fills small gaps; what came before the records service started, and a gap
longer than the feed's patience (the service was down longer than the broker kept its
queue), is asked here from the table's journal through ``request/resend`` (mqtt-api.md
1.3 and 1.4), as a **backfill**: a ``Job`` of one table, seqs ``floor`` to ``top``, asked
page by page downwards, each page at most ``RESEND_SPAN`` seqs (1,000).

* **Where it starts.** A table first seen: ``top`` is the ``prev_seq`` of the first live
  message the feed released (everything the table published before it), ``floor`` 1 and
  ``since`` the start of the current gaming day (or ``days`` gaming days back: ``lammer
  records run --backfill-days``). A gap the feed gave up on as ``unanswered`` or
  ``overflow``: its seqs, ``since`` likewise.
* **Where it stops.** At ``floor``, at a page whose oldest message is older than ``since``
  (that page is stored whole: a few messages of the day before), at the first message of
  the journal (``prev_seq`` null) or where the journal no longer holds (``missing_before``).
  What a gap's job could not fill (gone, or older than ``since``) is recorded as a gap.
* **Pages.** The next page ends at the ``prev_seq`` of the oldest copy of the last page (a
  table's seqs number journal records, not only messages: no page asks for seqs known to
  hold nothing). A page is done when the table answered ``ok`` and every copy it ``sent``
  arrived; one without progress for ``timeout`` seconds is asked again (after the table's
  share window, so the copies are published anew), backing off to ``MAX_BACKOFF``.
* **Pacing.** One page in flight per table, ``max_tables`` tables at once, and a page asked
  only when it fits in ``budget`` copies in any 60 s (the table's copy budget for
  ``records``, ``contract.requests.copy_budget``, less room for the feed's own gap fill):
  the table is never asked faster than it serves. A refusal (``resend budget spent``, the
  request rate, a busy link) is waited out as the answer says, never hammered: the table
  answers a budget refusal once a minute and only counts the rest.
* **Stored once.** A message of a table with a job whose seq is within the job's range is
  the backfill's (``claims``): the service checks it like any other (``records.messages``)
  and stores it, idempotent by (table, seq); the feed never sees it (it is below the
  feed's position). The job is kept in the store (``Save``, ``Drop``: the table
  ``backfill``) with the batches, so a restart goes on where it stood.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final

import psycopg
import structlog

from contract.feed import ANSWER_TOPIC, Resend
from contract.requests import BARE_USER, RESEND_SPAN, copy_budget
from records.messages import MAX_PAYLOAD
from records.observe import GamingDay
from records.store import Missing, Operation

log = structlog.get_logger("lammer.records.backfill")

BUDGET: Final = copy_budget("records") - 2 * RESEND_SPAN
"""Copies a table is asked for in any 60 s at most: its ``records`` budget less two pages,
left for the feed's gap fill of the same table."""
WINDOW: Final = 60.0
TIMEOUT: Final = 10.0
"""Seconds without an answer or a copy before a page is asked again (longer than the
table's share window, 5 s, so copies that were lost are published anew)."""
MAX_BACKOFF: Final = 60.0
TABLES: Final = 4
"""Tables backfilled at once (the others wait their turn): the service stores a few
thousand messages a second, the copies of four tables keep it busy."""
REFUSED_WAIT: Final = 1.0
"""Seconds before asking again after a refusal that names no wait (the request rate, a
busy link)."""
OFFLINE_WAIT: Final = 5.0

FIRST_SEEN: Final = "first seen"
GAP: Final = "gap"

_ASK_AGAIN = re.compile(r"ask again in (\d+) s")


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """One table's backfill: seqs ``floor`` to ``top``, the next page ending at
    ``next_seq``, none older than ``since`` needed (None: no time bound)."""

    base: str
    top: int
    floor: int
    next_seq: int
    since: datetime | None
    reason: str

    @property
    def table(self) -> str:
        """The table id (the base topic's last level)."""
        return self.base.rsplit("/", 1)[-1]


_SAVE = """
INSERT INTO backfill (base, top, floor, next_seq, since, reason)
VALUES (%s, %s, %s, %s, %s, %s)
ON CONFLICT (base, top) DO UPDATE SET next_seq = excluded.next_seq
"""
_DROP = "DELETE FROM backfill WHERE base = %s AND top = %s"
_LOAD = "SELECT base, top, floor, next_seq, since, reason FROM backfill ORDER BY started, base"


@dataclass(frozen=True, slots=True)
class Save(Operation):
    """Keep ``job`` (a new one, or where it stands)."""

    job: Job

    def apply(self, conn: psycopg.Connection[Any]) -> None:
        j = self.job
        conn.execute(_SAVE, (j.base, j.top, j.floor, j.next_seq, j.since, j.reason))


@dataclass(frozen=True, slots=True)
class Drop(Operation):
    """``job`` is done: forget it."""

    job: Job

    def apply(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(_DROP, (self.job.base, self.job.top))


def budget_for(user: str | None) -> int:
    """``BUDGET`` for the MQTT user the service asks as (None: no login, the bare request,
    counted as the terminal's), one page at least."""
    own = copy_budget(user or BARE_USER)
    return max(RESEND_SPAN, own - 2 * RESEND_SPAN)


def load(conn: psycopg.Connection[Any]) -> list[Job]:
    """The jobs a previous run left, oldest first."""
    with conn.transaction():
        return [
            Job(base=r[0], top=r[1], floor=r[2], next_seq=r[3], since=r[4], reason=r[5])
            for r in conn.execute(_LOAD)
        ]


def day_start(day: GamingDay, now: datetime, days: int = 1) -> datetime:
    """When the gaming day of ``now`` started (``days`` 2: the day before's start), UTC."""
    local = now.astimezone(day.tz)
    shift = timedelta(hours=day.starts.hour, minutes=day.starts.minute)
    first: date = (local.replace(tzinfo=None) - shift).date() - timedelta(days=days - 1)
    start = datetime.combine(first, day.starts)
    aware = start.replace(tzinfo=day.tz) if day.tz is not None else start.astimezone()
    return aware.astimezone(UTC)


def _ts(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _seq(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


@dataclass(slots=True)
class _Page:
    lo: int
    hi: int
    request_id: str
    progress_at: float
    answered: bool = False
    sent: int = 0
    missing_before: int | None = None
    seen: set[int] = field(default_factory=set)
    oldest: tuple[int, int | None, datetime | None] | None = None
    """(seq, prev_seq, ts) of the lowest copy that came."""


@dataclass(slots=True)
class _Run:
    job: Job
    started: float
    page: _Page | None = None
    not_before: float = 0.0
    tries: int = 0
    spent: deque[tuple[float, int]] = field(default_factory=deque)
    pages: int = 0
    copies: int = 0
    refused: int = 0


Output = Resend | Operation | Missing
"""What ``Backfill`` returns: a request to publish, or something to store (``Save``,
``Drop``, ``Missing``), in order."""


class Backfill:
    """The backfills of the module docstring, for any number of tables."""

    def __init__(
        self,
        *,
        jobs: Iterable[Job] = (),
        budget: int = BUDGET,
        timeout: float = TIMEOUT,
        max_tables: int = TABLES,
        ident: str = "records",
    ) -> None:
        if budget < RESEND_SPAN or timeout <= 0 or max_tables < 1:
            raise ValueError("budget >= one page, timeout > 0, max_tables >= 1")
        self.budget = budget
        self.timeout = timeout
        self.max_tables = max_tables
        self._ident = ident
        self._asked = 0
        self._runs: list[_Run] = [_Run(job, 0.0) for job in jobs]
        self.done = 0
        """Jobs finished."""
        self.pages = 0
        self.copies = 0
        self.refused = 0

    def pending(self) -> list[Job]:
        """The jobs not finished, in order."""
        return [run.job for run in self._runs]

    def start(self, job: Job, now: float) -> list[Output]:
        """Take ``job`` on; what to store (the job, so a restart goes on with it)."""
        if job.next_seq < job.floor:
            return []
        self._runs.append(_Run(job, now))
        log.info(
            "backfill queued",
            table=job.table,
            top=job.top,
            floor=job.floor,
            since=job.since.isoformat() if job.since else None,
            reason=job.reason,
        )
        return [Save(job)]

    def claims(self, base: str, topic: str, payload: bytes, now: float) -> bool:
        """Whether a message of ``base`` is the backfill's (a seq within a job's range):
        the caller checks and stores it, and does not hand it to the feed. An answer to a
        page (``response/resend``) is read and left to the feed (it is a new message)."""
        runs = [r for r in self._runs if r.job.base == base]
        if not runs or not payload.startswith(b"{") or len(payload) > MAX_PAYLOAD:
            return False  # not a table's message: the caller refuses it as it would
        try:
            body = json.loads(payload)
        except ValueError:
            return False
        if not isinstance(body, dict):
            return False
        if topic == ANSWER_TOPIC:
            self._answer(runs, body, now)
            return False
        seq = _seq(body.get("seq"))
        if seq is None:
            return False
        for run in runs:
            if run.job.floor <= seq <= run.job.top:
                page = run.page
                if page is not None and page.lo <= seq <= page.hi and seq not in page.seen:
                    page.seen.add(seq)
                    page.progress_at = now
                    run.spent.append((now, 1))
                    run.copies += 1
                    self.copies += 1
                    if page.oldest is None or seq < page.oldest[0]:
                        page.oldest = (seq, _seq(body.get("prev_seq")), _ts(body.get("ts")))
                return True
        return False

    def _answer(self, runs: list[_Run], body: dict[str, Any], now: float) -> None:
        request_id = body.get("request_id")
        for run in runs:
            page = run.page
            if page is None or page.request_id != request_id:
                continue
            if body.get("status") != "ok":
                error = str(body.get("error") or "")
                match = _ASK_AGAIN.search(error)
                wait = float(match.group(1)) + 0.5 if match else REFUSED_WAIT
                if "not connected" in error:
                    wait = OFFLINE_WAIT
                run.page = None
                run.not_before = now + wait
                run.refused += 1
                self.refused += 1
                log.info("backfill page refused", table=run.job.table, error=error, retry_in=wait)
                return
            page.answered = True
            page.progress_at = now
            sent = body.get("sent")
            page.sent = sent if isinstance(sent, int) and sent >= 0 else 0
            page.missing_before = _seq(body.get("missing_before"))
            return

    def next_deadline(self) -> float | None:
        """When ``tick`` has something to do at the earliest (None: nothing waits)."""
        times = []
        for run in self._runs[: self.max_tables]:
            if run.page is not None:
                times.append(run.page.progress_at + self.timeout)
            else:
                times.append(run.not_before)
        return min(times, default=None)

    def tick(self, now: float) -> list[Output]:
        """Time passed: pages done, pages to ask (or ask again)."""
        out: list[Output] = []
        for run in list(self._runs[: self.max_tables]):
            page = run.page
            if page is not None:
                if page.answered and len(page.seen) >= page.sent:
                    self._page_done(run, page, now, out)
                elif now - page.progress_at >= self.timeout:
                    run.page = None
                    run.tries += 1
                    run.not_before = now
                    if run.tries > 1:
                        run.not_before += min(MAX_BACKOFF, self.timeout * 2 ** (run.tries - 2))
                    log.info(
                        "backfill page unanswered",
                        table=run.job.table,
                        from_seq=page.lo,
                        to_seq=page.hi,
                        tries=run.tries,
                    )
            if run in self._runs and run.page is None and now >= run.not_before:
                self._ask(run, now, out)
        return out

    def _ask(self, run: _Run, now: float, out: list[Output]) -> None:
        hi = run.job.next_seq
        lo = max(run.job.floor, hi - RESEND_SPAN + 1)
        while run.spent and run.spent[0][0] <= now - WINDOW:
            run.spent.popleft()
        spent = sum(n for _, n in run.spent)
        if spent + (hi - lo + 1) > self.budget:
            # Wait until enough of the last minute's copies are a minute old.
            need = spent + (hi - lo + 1) - self.budget
            for at, n in run.spent:
                need -= n
                if need <= 0:
                    run.not_before = at + WINDOW
                    break
            return
        if run.started == 0.0:
            run.started = now  # a job a previous run left: timed from here
        self._asked += 1
        page = _Page(lo, hi, f"backfill-{self._ident}-{self._asked}", now)
        run.page = page
        out.append(Resend(table=run.job.base, from_seq=lo, to_seq=hi, request_id=page.request_id))

    def _page_done(self, run: _Run, page: _Page, now: float, out: list[Output]) -> None:
        job = run.job
        run.page = None
        run.tries = 0
        run.pages += 1
        self.pages += 1
        oldest = page.oldest
        left: tuple[int, str] | None = None  # (last seq not filled, why) when it stops
        if page.missing_before is not None and page.missing_before > page.lo:
            left = (page.missing_before - 1, "gone: the table's journal no longer holds them")
        elif (
            oldest is not None
            and job.since is not None
            and oldest[2] is not None
            and oldest[2] < job.since
        ):
            left = (oldest[0] - 1, "bound: older than the backfill bound (--backfill-days)")
        elif oldest is not None and oldest[1] is None:
            left = (oldest[0] - 1, "")  # the journal's first message: nothing before it
        else:
            nxt = oldest[1] if oldest is not None and oldest[1] is not None else page.lo - 1
            if nxt >= job.floor:
                run.job = replace(job, next_seq=nxt)
                out.append(Save(run.job))
                return
        if left is not None and job.reason == GAP and left[1] and left[0] >= job.floor:
            out.append(Missing(table=job.table, from_seq=job.floor, to_seq=left[0], reason=left[1]))
        self._runs.remove(run)
        self.done += 1
        out.append(Drop(job))
        log.info(
            "backfill done",
            table=job.table,
            top=job.top,
            pages=run.pages,
            copies=run.copies,
            refused=run.refused,
            seconds=round(now - run.started, 1),
        )
