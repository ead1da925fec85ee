"""What the table writes: its memory, the journal transactions that change it, and the
messages they queue in the journal's outbox.

The table (``daemon.core.TableCore``) and its request desk (``daemon.desk.RequestDesk``)
both write through one ``Ledger``: a ``batch()`` is one SQLite transaction (one fsync), and
the table's memory (``daemon.replay.Memory``: its state, each device's last frame, the
retained bodies last published) is one value that the transaction keeps, or, when the
journal refuses it, puts back as it was. ``publish`` turns the rules' outcomes into the
messages of the MQTT contract, each written to the outbox with its ``seq`` and ``ts``;
retained state topics are queued only when their content changed.

Nothing here reads a clock (every call is given its time), starts a task or touches the
network.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from typing import Any

from contract.payloads import Publication
from daemon.journal import Journal
from daemon.logs import TxLog, event_context, outcome_fields
from daemon.publications import outcome_publication, state_publications
from daemon.records import to_record
from daemon.replay import Memory
from daemon.upkeep import JournalUpkeep
from rules import table
from rules.events import AlarmCleared, AlarmRaised, Outcome


class Ledger:
    """The table's memory and its journal transactions (see the module docstring)."""

    def __init__(
        self,
        journal: Journal,
        memory: Memory,
        *,
        upkeep: JournalUpkeep,
        table_id: str,
        info: Publication,
        log: TxLog,
    ) -> None:
        self.journal = journal
        self.memory = memory
        """The table as it is between events (``daemon.replay.Memory``)."""
        self.upkeep = upkeep
        self.table_id = table_id
        self.info = info
        """The retained ``info`` body (the daemon's version, the game and its settings)."""
        self.log = log

    @property
    def state(self) -> table.TableState:
        """The table as it is."""
        return self.memory.state

    def remember(self, **changes: Any) -> None:
        """The memory with ``changes`` (fields of ``Memory``), kept by the open batch."""
        self.memory = replace(self.memory, **changes)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """One journal transaction, and the table's memory with it: when the journal
        refuses (a full disk), the memory is the value it was before, so the same event
        can be handled again once the journal works (nothing half done, nothing twice);
        the lines logged inside come out only if it commits."""
        saved = self.memory
        try:
            with self.log.held(), self.upkeep.batch():
                yield
        except BaseException:
            self.memory = saved
            raise

    def write(self, kind: str, record: dict[str, Any], *, at: datetime) -> int:
        """Append a record of ``kind`` at ``at``; returns its ``seq``."""
        return self.journal.append(kind, record, ts=at)

    def queue(self, publication: Publication, at: datetime) -> int:
        """Write ``publication`` to the outbox; returns 1 (the messages queued)."""
        topic, retained, body = publication
        self.journal.append_publish(topic, body, retained=retained, ts=at)
        if retained:
            self.remember(published={**self.memory.published, topic: body})
        return 1

    def publish(self, outcomes: tuple[Outcome, ...], at: datetime) -> int:
        """Queue what the rules' ``outcomes`` publish, then every state topic that changed;
        returns the messages queued."""
        queued = 0
        for outcome in outcomes:
            if isinstance(outcome, AlarmRaised):
                self.log.warning(
                    "alarm raised",
                    code=outcome.code,
                    alarm_device=outcome.device,
                    message=outcome.message,
                )
                continue  # published below as the `alarms` and `state` topics
            if isinstance(outcome, AlarmCleared):
                self.log.info("alarm cleared", code=outcome.code, alarm_device=outcome.device)
                continue
            try:
                publication = outcome_publication(outcome, table=self.table_id)
            except ValueError as exc:
                # A bug between the rules and the payload contract must not stop the table:
                # keep the outcome in the journal for review and go on. Only what names the
                # outcome is logged: the payload model refuses an outcome precisely when it
                # may carry a card still face down (a flagged result with a hand), so its
                # fields stay in the protected journal.
                self.log.error(
                    "outcome not publishable",
                    error=str(exc),
                    outcome=type(outcome).__name__,
                    **event_context(outcome),
                )
                self.write(
                    "daemon", {"unpublishable": to_record(outcome), "error": str(exc)}, at=at
                )
                continue
            if publication is None:  # only the alarm outcomes, handled above, have none
                continue
            self.log.info("outcome", topic=publication.topic, **outcome_fields(outcome))
            queued += self.queue(publication, at)
        return queued + self.queue_state(at)

    def queue_state(self, at: datetime) -> int:
        """Queue every retained state topic whose content changed."""
        queued = 0
        memory = self.memory
        # Unchanged bodies are not published again (republishing after a reconnect is the
        # MQTT link's job).
        built = state_publications(memory.state, table=self.table_id, since=memory.built_from)
        for publication in (self.info, *built):
            if self.memory.published.get(publication.topic) != publication.body:
                queued += self.queue(publication, at)
        self.remember(built_from=memory.state)
        return queued
