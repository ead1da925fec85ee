"""The requests a table answers (mqtt-api.md "Requests"): one ``RequestDesk`` per table.

``decide(incoming, link)`` for a stickperson's request from MQTT: checked by the request
models and by the rules, journaled when legal (with the operator and the time), journaled
with its reason when refused, and answered on ``response/<name>`` either way. What the shell
(``daemon.app``) is to do next comes back as a value, an ``Answer``:

* ``queued``: the messages written to the outbox (the shell wakes the MQTT link);
* ``resend``: the copies a ``request/resend`` is served (``daemon.resend``), which the shell
  hands to the MQTT link; they never go through the outbox (no new record, no new seq);
* ``authenticate``: an admitted ``request/authenticate``, whose files the shell reads off
  the event loop before it calls ``authenticated`` with what it read.

The desk only reads the link's load (``LinkLoad``: connected? how many copies wait?), given
with each request; it never holds the link. Requests that cannot be answered, requests
refused unread for the rate (``daemon.intake``) and resends refused past a user's budget
are counted, and reported once a minute at most (``flush_drops``, from the shell's timer).

Like the table (``daemon.core``), nothing here awaits, reads a clock but the table's, or
touches the network.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Protocol

from contract.requests import BARE_USER, ComponentHmac
from contract.software import Component
from daemon.core import TableCore
from daemon.intake import BUSY_ERROR
from daemon.outbox import OutboxMessage
from daemon.records import to_record
from daemon.requests import (
    AuthenticateAsked,
    DropCounter,
    Dropped,
    Incoming,
    Refused,
    ResendAsked,
    admit,
    classify,
    request_id_of,
    response_publication,
)
from daemon.resend import (
    BACKLOG_ERROR,
    NO_LINK_ERROR,
    RATE_ERROR,
    RESEND_BACKLOG,
    Refuse,
    ResendDesk,
)
from daemon.segments import published_between
from foundation.bucket import TokenBucket
from rules import table
from rules.errors import DecisionError

AUTHENTICATIONS_PER_MINUTE: Final = 6
"""``request/authenticate`` served per user a minute, and at most this many at once (each
reads every installed file, tens of milliseconds off the event loop); more are refused with
``AUTH_RATE_ERROR``."""

AUTH_RATE_ERROR: Final = (
    f"at most {AUTHENTICATIONS_PER_MINUTE} authentications a minute per user: ask again in a minute"
)


class LinkLoad(Protocol):
    """What a resend needs to know of the MQTT link (``daemon.mqtt.MqttLink`` fits)."""

    @property
    def connected(self) -> bool:
        """True while the link to the broker is up."""
        ...

    @property
    def resend_backlog(self) -> int:
        """Copies handed to the link and not yet published."""
        ...


@dataclass(frozen=True, slots=True)
class Authentication:
    """An admitted ``request/authenticate``, for the shell to serve (``authenticated``)."""

    incoming: Incoming
    asked: AuthenticateAsked


@dataclass(frozen=True, slots=True)
class Answer:
    """What a request left for the shell to do (module docstring)."""

    queued: int = 0
    resend: list[OutboxMessage] = field(default_factory=list)
    authenticate: Authentication | None = None


AuthenticateResult = tuple[tuple[Component, ...], str] | str
"""What the shell read for a ``request/authenticate``: each component's HMAC under the
seed and the whole's, or the sentence why the files could not be read."""


class RequestDesk:
    """The requests of one table (see the module docstring)."""

    def __init__(self, core: TableCore, *, resends: ResendDesk | None = None) -> None:
        self.core = core
        self.ledger = core.ledger
        self.log = core.log
        self.dropped = DropCounter()
        """Requests dropped for a name that cannot be answered (mqtt-api.md "Requests")."""
        self.busy = DropCounter()
        """Requests refused unread because they came faster than the table serves them
        (``daemon.intake``): counted, reported once a minute."""
        self.resends = resends if resends is not None else ResendDesk()
        """What each user's resends may cost: a rate, copies shared, a budget
        (``daemon.resend``)."""
        self.resend_refused = DropCounter()
        """Resends refused past a user's copy budget and not answered: counted, reported
        once a minute."""
        self.authentications: dict[str, TokenBucket] = {}
        """Per user, the rate of its ``request/authenticate``."""

    def decide(self, incoming: Incoming, link: LinkLoad | None = None) -> Answer:
        """A stickperson's request from MQTT: check, journal, apply, answer. ``link``: the
        MQTT link's load, which a resend needs (None: no link, a resend is refused).

        In this order, before anything parses the payload: the name against the known
        requests; an unknown name of the right shape is answered with an error, a name of
        any other shape is dropped and counted (``DropCounter``); a payload over 4 KiB is
        refused with its size, SHA-256 and first bytes kept for the record."""
        core = self.core
        at = core.clock()
        core.upkeep.rotate_if_new_day(at)
        if incoming.busy:
            return Answer(self._answer_busy(incoming, at))
        request = admit(incoming, at=at)
        if isinstance(request, Dropped):
            self._drop(incoming, request.reason, at)
            return Answer()
        if isinstance(request, Refused):
            return Answer(self._refuse(incoming, request.request_id, request.error, at))
        if isinstance(request, ResendAsked):
            return self._resend(incoming, request, link, at)
        if isinstance(request, AuthenticateAsked):
            return self._authenticate_admit(incoming, request, at)
        name = incoming.name
        rlog = self.log.bind(request=name, request_id=request.request_id)
        decision = request.decision
        try:
            new_state, outcomes = table.apply(core.state, decision, at=at)
        except DecisionError as exc:
            return Answer(self._refuse(incoming, request.request_id, str(exc), at))
        with self.ledger.batch():
            seq = self.ledger.write("decision", {"event": to_record(decision)}, at=at)
            self.ledger.remember(state=new_state)
            queued = self.ledger.publish(outcomes, at)
            queued += self._respond(name, request.request_id, None, at)
            core.upkeep.snapshot_if_due(at)
        rlog.info(
            "decision applied",
            seq=seq,
            decision=type(decision).__name__,
            roll=getattr(decision, "roll_id", None),  # an alarm_ack names no roll
            operator=decision.operator,
        )
        return Answer(queued)

    def _resend(
        self, incoming: Incoming, asked: ResendAsked, link: LinkLoad | None, at: datetime
    ) -> Answer:
        """``request/resend`` (mqtt-api.md 1.3 and 1.4, ``daemon.resend``): the messages
        of the range are returned as copies for the link, those sent in the last few
        seconds not again, within the asking user's rate and budget; the request and what
        was sent are journaled, and answered. Past the budget, refused: answered now and
        then, counted otherwise."""
        request, request_id = asked.request, asked.request_id
        user = incoming.user or BARE_USER
        if not self.resends.take_request(user):
            return Answer(self._refuse(incoming, request_id, RATE_ERROR, at))
        if link is None or not link.connected:
            return Answer(self._refuse(incoming, request_id, NO_LINK_ERROR, at))
        if link.resend_backlog >= RESEND_BACKLOG:
            return Answer(self._refuse(incoming, request_id, BACKLOG_ERROR, at))
        journal = self.core.journal
        found = published_between(journal, request.from_seq, request.to_seq, key=journal.key)
        # Only JSON payloads (the outbox holds no other; availability never goes there).
        copies = [m for m in found.messages if m.payload[:1] == b"{"]
        plan = self.resends.plan(user, copies)
        if isinstance(plan, Refuse):
            if plan.answer:
                return Answer(self._refuse(incoming, request_id, plan.error, at))
            report = self.resend_refused.add(incoming, plan.error, at)
            if report is not None:
                self._report("resend_refused", report, at)
            return Answer()
        record: dict[str, object] = {
            "operator": request.operator,
            "request_id": request_id,
            "from_seq": request.from_seq,
            "to_seq": request.to_seq,
            "sent": len(copies),
            "missing_before": found.missing_before,
        }
        if incoming.user is not None:
            record["user"] = incoming.user
        if plan.shared:
            record["shared"] = plan.shared  # in `sent`, published for an earlier request
        queued = self._answer_decision(
            incoming,
            request_id,
            {"resend": record},
            at,
            sent=len(copies),
            missing_before=found.missing_before,
        )
        self.resends.served(user, plan)
        self.log.info("resend served", **record)
        return Answer(queued, resend=plan.publish)

    def _authenticate_admit(
        self, incoming: Incoming, asked: AuthenticateAsked, at: datetime
    ) -> Answer:
        """A well-formed ``request/authenticate``: within its user's rate it is handed to
        the shell (``Answer.authenticate``), which reads the files off the event loop; past
        it, refused."""
        user = incoming.user or BARE_USER
        rate = self.authentications.get(user)
        if rate is None:
            rate = self.authentications[user] = TokenBucket(
                AUTHENTICATIONS_PER_MINUTE / 60, AUTHENTICATIONS_PER_MINUTE
            )
        if not rate.take(at.timestamp()):
            return Answer(self._refuse(incoming, asked.request_id, AUTH_RATE_ERROR, at))
        return Answer(authenticate=Authentication(incoming, asked))

    def authenticated(self, admitted: Authentication, answer: AuthenticateResult) -> int:
        """Answer a ``request/authenticate`` with what the shell read (``answer``);
        journaled with who asked (operator, user) and the seed. Returns the messages
        queued."""
        incoming, request = admitted.incoming, admitted.asked.request
        request_id = admitted.asked.request_id
        at = self.core.clock()
        if isinstance(answer, str):
            return self._refuse(incoming, request_id, answer, at)
        macs, digest = answer
        record: dict[str, object] = {
            "operator": request.operator,
            "request_id": request_id,
            "user": incoming.user or BARE_USER,
            "seed": request.seed,
            "digest": digest,
            "components": len(macs),
            "software_digest": self.core.software_digest,
        }
        queued = self._answer_decision(
            incoming,
            request_id,
            {"authenticate": record},
            at,
            seed=request.seed,
            digest=digest,
            components=[ComponentHmac(path=c.path, hmac=c.digest) for c in macs],
        )
        self.log.info("software authenticated", **record)
        return queued

    def _answer_decision(
        self,
        incoming: Incoming,
        request_id: str | int | None,
        record: dict[str, object],
        at: datetime,
        **fields: Any,
    ) -> int:
        """Journal a request served (``record``, kind ``decision``) and queue its ``ok``
        answer with ``fields`` (``response_publication``'s), in one transaction."""
        table_id = self.core.table_id
        with self.ledger.batch():
            self.ledger.write("decision", record, at=at)
            answer = response_publication(incoming.name, request_id, None, table=table_id, **fields)
            return self.ledger.queue(answer, at)

    def _refuse(
        self,
        incoming: Incoming,
        request_id: str | int | None,
        error: str,
        at: datetime,
    ) -> int:
        """Journal a refused request for the record (who asked what, and why it was
        refused) and answer it; replay skips it (a decision record without an event)."""
        name = incoming.name
        self.log.bind(request=name, request_id=request_id).warning(
            "request rejected", error=error, size=incoming.size
        )
        with self.ledger.batch():
            record = {"rejected": {**incoming.summary(), "error": error}}
            self.ledger.write("decision", record, at=at)
            return self._respond(name, request_id, error, at)

    def _drop(self, incoming: Incoming, reason: str, at: datetime) -> None:
        """Count a request that cannot be answered; the log and the journal hear of drops
        once a minute at most (a flood of them costs one line and one record a minute)."""
        report = self.dropped.add(incoming, reason, at)
        if report is not None:
            self._report("dropped_requests", report, at)

    def flush_drops(self) -> int:
        """Report what was counted since the last report (drops, busy refusals, resends
        past a budget), if a minute has passed: the shell calls this from its timer, so a
        flood that stops is still reported. A new gaming day rotates the journal first (as
        a request does), so the reports go into the day's segment. Returns the messages
        queued: none (a count is journaled, never published)."""
        at = self.core.clock()
        self.core.upkeep.rotate_if_new_day(at)
        for kind, counter in (
            ("dropped_requests", self.dropped),
            ("busy_requests", self.busy),
            ("resend_refused", self.resend_refused),
        ):
            report = counter.due(at)
            if report is not None:
                self._report(kind, report, at)
        return 0

    def _answer_busy(self, incoming: Incoming, at: datetime) -> int:
        """A request refused unread for the rate (``daemon.intake``): counted with those it
        stands for, and answered busy when its name can be answered. The journal holds the
        answer and, once a minute at most, the count (``busy_requests``), not each request."""
        report = self.busy.add(incoming, "busy", at, count=incoming.busy)
        with self.ledger.batch():
            if report is not None:
                self._report("busy_requests", report, at)
            if classify(incoming.name) == "malformed":
                return 0
            return self._respond(incoming.name, request_id_of(incoming.payload), BUSY_ERROR, at)

    def _report(self, kind: str, report: dict[str, object], at: datetime) -> None:
        """Log and journal a count of requests not served one by one (kind ``decision``)."""
        self.log.warning(REPORT_LINES[kind], **report)
        self.ledger.write("decision", {kind: report}, at=at)

    def _respond(
        self, name: str, request_id: str | int | None, error: str | None, at: datetime
    ) -> int:
        publication = response_publication(name, request_id, error, table=self.core.table_id)
        return self.ledger.queue(publication, at)


REPORT_LINES: Final = {
    "dropped_requests": "requests dropped: names that cannot be answered",
    "busy_requests": "requests refused unread: more arrive than the table serves",
    "resend_refused": "resends refused past a user's copy budget, counted",
}
"""The log line of each count ``RequestDesk`` reports, by its record's key."""
