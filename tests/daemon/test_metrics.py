"""The table's ``[metrics]`` section and the counts the shell keeps for it."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Histogram

from daemon.config import validate_config
from daemon.errors import ConfigFileError
from daemon.outbox import OutboxMessage
from daemon.tally import Tally

BASE: dict[str, Any] = {
    "table": {"id": "craps-1", "game": "CRAPS"},
    "dice_reader": {"port": "/dev/ttyUSB0"},
}


def test_metrics_are_opt_in_and_loopback_unless_scrapers_are_named() -> None:
    assert validate_config(BASE).metrics is None
    config = validate_config({**BASE, "metrics": {"listen": "9464"}})
    assert config.metrics is not None
    assert str(config.metrics.settings()) == "127.0.0.1:9464"
    with pytest.raises(ConfigFileError, match=r"metrics: .*allow_from"):
        validate_config({**BASE, "metrics": {"listen": "0.0.0.0:9464"}})
    wide = validate_config(
        {**BASE, "metrics": {"listen": "0.0.0.0:9464", "allow_from": ["10.1.0.0/16"]}}
    )
    assert wide.metrics is not None
    assert wide.metrics.settings().allowed("10.1.2.3")
    assert not wide.metrics.settings().allowed("10.2.0.1")
    with pytest.raises(ConfigFileError, match="metrics"):
        validate_config({**BASE, "metrics": {}})  # listen is required
    with pytest.raises(ConfigFileError, match="metrics"):
        validate_config({**BASE, "metrics": {"listen": "9464", "port": 1}})


def _message(seq: int, topic: str) -> OutboxMessage:
    return OutboxMessage(seq=seq, topic=topic, payload=b"{}", retained=False)


def test_a_frame_is_measured_when_its_last_message_is_acknowledged() -> None:
    registry = CollectorRegistry()
    tally = Tally(
        latency=Histogram("t_seconds", "t", buckets=(0.5, 1, 5), registry=registry).observe
    )
    tally.frame_queued(3, arrived=10.0)  # a roll: messages 1 to 3
    tally.frame_queued(5, arrived=11.0)  # the next: 4 and 5
    tally.published([_message(1, "craps/roll"), _message(2, "craps/board")], now=12.0)
    assert registry.get_sample_value("t_seconds_count") == 0  # message 3 not yet
    tally.published([_message(3, "state"), _message(4, "craps/roll")], now=12.2)
    assert registry.get_sample_value("t_seconds_count") == 1
    assert registry.get_sample_value("t_seconds_sum") == pytest.approx(2.2)
    tally.published([_message(5, "alarms")], now=13.0)
    assert registry.get_sample_value("t_seconds_count") == 2
    assert tally.results == 2  # the two rolls
