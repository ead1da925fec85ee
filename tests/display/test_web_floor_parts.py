"""``lammer web`` on the floor, its parts: several brokers to try in order, the pit's areas."""

from __future__ import annotations

import random

import pytest

from contract.nodes import Nodes
from display.errors import WebConfigError
from display.web.config import validate_web_config
from display.web.relay import BACKOFF
from foundation.endpoints import parse_nodes


def test_every_node_of_the_floor_in_order_with_its_port_or_the_default() -> None:
    assert parse_nodes("floor1,floor2:1884,[::1]:1885,[fd00::2]", 1883) == [
        ("floor1", 1883),
        ("floor2", 1884),
        ("::1", 1885),
        ("fd00::2", 1883),
    ]
    config = validate_web_config({"mqtt_host": "a, b:2000", "mqtt_port": 1999})
    assert config.mqtt_nodes == [("a", 1999), ("b", 2000)]


@pytest.mark.parametrize(
    "value",
    ["a,,b", "a b", "a:x", "a,a", "[::1", "[zz]", "a:0", "a:70000", ",".join("n" * 17)],
)
def test_a_bad_list_of_brokers_is_refused(value: str) -> None:
    with pytest.raises(WebConfigError) as info:
        validate_web_config({"mqtt_host": value})
    assert any(p.startswith("mqtt_host:") for p in info.value.problems), info.value.problems


def test_areas_name_tables_once_each() -> None:
    config = validate_web_config({"areas": {"Pit 1": ["craps-1", "uth-1"], "VIP": ["bj-7"]}})
    assert config.areas == {"Pit 1": ["craps-1", "uth-1"], "VIP": ["bj-7"]}
    bad = [
        {"Pit 1": ["t1"], "Pit 2": ["t1"]},  # a table in two areas
        {"": ["t1"]},
        {"x" * 65: ["t1"]},
        {"Pit\n1": ["t1"]},
        {"Pit 1": ["a/b"]},
        {"Pit 1": ["a b"]},
        {"Pit 1": ["#"]},
        {"Pit 1": [f"t{i}" for i in range(1001)]},
    ]
    for areas in bad:
        with pytest.raises(WebConfigError):
            validate_web_config({"areas": areas})


def test_after_a_failure_the_next_node_at_once_and_a_backoff_after_a_round() -> None:
    nodes = Nodes([("a", 1), ("b", 2), ("c", 3)], random.Random(1), BACKOFF.delay)
    assert nodes.current == ("a", 1)
    assert nodes.failed() == 0.05
    assert nodes.current == ("b", 2)
    assert nodes.failed() == 0.05
    assert nodes.current == ("c", 3)
    first = nodes.failed()  # every node failed in a row: back off
    assert nodes.current == ("a", 1)
    assert 0.125 <= first <= 0.25
    for _ in range(3 * 10):
        wait = nodes.failed()
    assert wait <= 5.0
    nodes.connected()  # a node answered: the next failure moves on at once again
    assert nodes.failed() == 0.05
