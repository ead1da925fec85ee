"""``deploy.postgres``: the private cluster runs as it says (fsync off for the tests, on
when ``durable``, as the records benchmark's floor-like cluster must)."""

from __future__ import annotations

import psycopg
import pytest

from deploy.postgres import Postgres


@pytest.mark.service
@pytest.mark.parametrize("durable", [False, True])
def test_fsync_is_on_only_when_durable(durable: bool) -> None:
    pg = Postgres(durable=durable)
    pg.start()
    try:
        with psycopg.connect(pg.admin_dsn(), autocommit=True) as conn:
            settings: dict[str, str] = dict(
                conn.execute(
                    "SELECT name, setting FROM pg_settings "
                    "WHERE name IN ('fsync', 'synchronous_commit')"
                ).fetchall()
            )
    finally:
        pg.stop()
    assert settings == {"fsync": "on" if durable else "off", "synchronous_commit": "on"}
