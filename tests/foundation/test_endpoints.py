"""Addresses (foundation.endpoints): one set of rules for HOST:PORT wherever lammer reads one."""

from __future__ import annotations

import pytest

from foundation.endpoints import (
    Endpoint,
    is_loopback,
    parse_endpoint,
    parse_listen,
    parse_nodes,
)


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("127.0.0.1:8080", "127.0.0.1", 8080),
        ("floor-1.casino.example:1883", "floor-1.casino.example", 1883),
        ("[::1]:8883", "::1", 8883),
        ("0.0.0.0:1", "0.0.0.0", 1),  # noqa: S104  parsed, not bound
    ],
)
def test_the_readers_agree_on_what_an_address_is(text: str, host: str, port: int) -> None:
    assert parse_endpoint(text) == Endpoint(host, port)
    assert parse_listen(text) == (host, port)
    assert parse_nodes(text, 1) == [(host, port)]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("bad host:8080", "not an IP address or host name: 'bad host'"),
        ("[nope]:8080", "not an IPv6 address: 'nope'"),
        ("h:0", "must be between 1 and 65535, got 0"),
        ("h:123456", "must be between 1 and 65535, got 123456"),
    ],
)
def test_the_readers_refuse_the_same_addresses(text: str, problem: str) -> None:
    for parse in (parse_endpoint, parse_listen, lambda t: parse_nodes(t, 1)):
        with pytest.raises(ValueError, match=problem.replace("(", r"\(")):
            parse(text)


def test_each_reader_words_a_malformed_address_its_own_way() -> None:
    with pytest.raises(ValueError, match=r"expected HOST:PORT \(or \[IPv6\]:PORT\)"):
        parse_endpoint("8080")
    with pytest.raises(ValueError, match="must be HOST:PORT"):
        parse_listen("8080")
    with pytest.raises(ValueError, match="in brackets"):
        parse_listen("::1:8080")


def test_nodes_take_the_default_port_and_bare_ipv6() -> None:
    assert parse_nodes("floor1, fd00::2 ,[fd00::3],floor2:1884", 1883) == [
        ("floor1", 1883),
        ("fd00::2", 1883),
        ("fd00::3", 1883),
        ("floor2", 1884),
    ]
    with pytest.raises(ValueError, match="given twice"):
        parse_nodes("a,a:1883", 1883)
    with pytest.raises(ValueError, match="an empty broker"):
        parse_nodes("a,,b", 1883)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("localhost", True), ("127.0.0.2", True), ("::1", True), ("10.0.0.1", False), ("h", False)],
)
def test_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
    assert Endpoint(host, 1).loopback is loopback
