"""Fixtures of the integration tests: tables built on the harness, torn down whatever
happens (no process outlives its test)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from tests.conftest import Broker
from tests.integration.harness import Table

MakeTable = Callable[..., Table]
"""``make_table(game, *, broker=None, extra_config="", device_port="", device_settings="")``:
a new ``Table`` (not started)."""


@pytest.fixture
async def make_table(tmp_path: Path, mosquitto: Broker) -> AsyncIterator[MakeTable]:
    """Make tables on the session's broker (or on ``broker=``); all are closed at the end."""
    tables: list[Table] = []

    def make(
        game: str,
        *,
        broker: Broker | None = None,
        extra_config: str = "",
        device_port: str = "",
        device_settings: str = "",
    ) -> Table:
        workdir = tmp_path / f"table{len(tables) + 1}"
        workdir.mkdir()
        table = Table(
            workdir,
            broker or mosquitto,
            game,
            extra_config=extra_config,
            device_port=device_port,
            device_settings=device_settings,
        )
        tables.append(table)
        return table

    yield make
    for table in tables:
        await table.close()
