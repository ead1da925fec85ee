"""The records service's pure parts (``records.service``, ``records.intake``), without a
broker or a database: the topic a message came on split into its table, the prefixes it is
given, the time it writes and its manual acknowledgements. Fast, so that mutation testing
(docs/developers/mutation.md) can run them against every mutant that reaches them."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import aiomqtt
import pytest

from records.intake import Settings, now_ts, table_of
from records.service import Records, _Connection, prefixes_of


def _records(*prefixes: str) -> Records:
    """A service whose only state is its settings: ``split`` reads nothing else."""
    records = Records.__new__(Records)
    records.settings = Settings(
        mqtt_host="127.0.0.1",
        mqtt_port=1883,
        mqtt_user="records",
        mqtt_password=None,
        prefixes=prefixes,
        dsn="",
    )
    return records


@pytest.mark.parametrize(
    ("topic", "where"),
    [
        ("craps/t1/state", ("craps/t1", "t1", "state")),
        ("craps/t1/response/resend", ("craps/t1", "t1", "response/resend")),
        ("floor/bj/t2/result", ("floor/bj/t2", "t2", "result")),
        ("craps/t1", None),  # a table with nothing under it
        ("craps/t1/", None),
        ("craps//state", None),  # no table
        ("crapsx/t1/state", None),  # another prefix that begins the same
        ("floor/t1/state", None),  # only a prefix's first level
        ("other/t1/state", None),
        ("craps", None),
    ],
)
def test_split_names_the_base_the_table_and_the_topic_under_it(
    topic: str, where: tuple[str, str, str] | None
) -> None:
    assert _records("craps", "floor/bj").split(topic) == where


def test_split_tries_every_prefix_in_order() -> None:
    records = _records("floor/bj", "floor")
    assert records.split("floor/bj/t2/result") == ("floor/bj/t2", "t2", "result")
    assert records.split("floor/t3/state") == ("floor/t3", "t3", "state")
    assert records.split("floor/bj/") is None


def test_prefixes_are_kept_in_order() -> None:
    assert prefixes_of(["craps", "floor/bj", "a/b/c"]) == ("craps", "floor/bj", "a/b/c")
    assert prefixes_of(["FLOOR/XX", "x-1"]) == ("FLOOR/XX", "x-1")  # any other character
    assert prefixes_of([]) == ()


@pytest.mark.parametrize("value", ["", "craps/+", "craps/#", "+", "#", "/craps", "craps/"])
def test_a_prefix_with_a_wildcard_or_an_empty_level_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="is not a topic prefix") as e:
        prefixes_of(["craps", value])
    assert str(e.value) == f"{value!r} is not a topic prefix (levels without + or #)"


def test_the_table_of_a_base_topic_is_its_last_level() -> None:
    assert table_of("craps/t1") == "t1"
    assert table_of("floor/bj/t2") == "t2"
    assert table_of("t3") == "t3"


@pytest.fixture
def far_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local time zone 14 hours from UTC, for the test only."""
    monkeypatch.setenv("TZ", "Pacific/Kiritimati")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("far_zone")
def test_now_is_written_as_the_contract_does() -> None:
    # In UTC, whatever the machine's zone.
    before = datetime.now(UTC)
    ts = now_ts()
    after = datetime.now(UTC)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", ts), ts
    when = datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%f%z")
    assert before - timedelta(milliseconds=1) <= when <= after


class _Paho:
    """What ``_Connection`` reads of paho's client: its ``ack`` calls, recorded."""

    def __init__(self) -> None:
        self.acks: list[tuple[int, int]] = []

    def ack(self, mid: int, qos: int) -> None:
        self.acks.append((mid, qos))


class _Client:
    def __init__(self) -> None:
        self._client = _Paho()


def test_a_message_is_acknowledged_on_its_own_connection_only() -> None:
    client = _Client()
    connection = _Connection(cast(aiomqtt.Client, client))
    assert connection.open
    assert connection.acker(7, 0) is None  # QoS 0: nothing to send
    first, second = connection.acker(8, 1), connection.acker(9, 2)
    assert first is not None
    assert second is not None
    assert client._client.acks == []  # not before it is called
    second()
    first()
    assert client._client.acks == [(9, 2), (8, 1)]
    connection.open = False  # the connection it came by is gone
    first()
    assert client._client.acks == [(9, 2), (8, 1)]
    late: Any = connection.acker(10, 1)
    late()
    assert client._client.acks == [(9, 2), (8, 1)]
