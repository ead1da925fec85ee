"""docs/reference/mqtt.md's tables are the contract's (contract/docs.py): a field or a topic
added to the declarations shows in the document, or this test says the file is stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.docs import main, tables, update
from contract.payloads import CONTRACT_VERSION

MQTT_MD = Path(__file__).resolve().parents[2] / "docs" / "reference" / "mqtt.md"


def test_the_tables_of_docs_mqtt_md_are_up_to_date() -> None:
    text = MQTT_MD.read_text(encoding="utf-8")
    assert update(text) == text, "docs/reference/mqtt.md is stale: run `make schemas` and commit it"


def test_the_page_names_the_contract_version_tables_follow() -> None:
    # The prose around the tables is written by hand: its version is the one info publishes.
    text = MQTT_MD.read_text(encoding="utf-8")
    title = text.splitlines()[0]
    assert title.endswith(f"(contract {CONTRACT_VERSION})"), title
    assert f'(`contract`: `"{CONTRACT_VERSION}"`)' in text


def test_a_table_names_every_field_with_its_values_and_its_version() -> None:
    generated = tables()
    # mqtt-api.md: craps/result has roll_id, bet, outcome and pays; bet is one of three.
    result = generated["craps/result"]
    for field in ("`roll_id`", "`bet`", "`outcome`", "`pays`"):
        assert field in result
    assert "`all_small` `all_tall` `make_em_all`" in result
    assert "| `table`" not in result  # the envelope is described once, under Conventions
    # lammer's additions and the spec's 1.1 ones are marked as such.
    assert "| `last_roll` (**added**) |" in generated["craps/board"]
    assert "| `reason` (1.1) |" in generated["bust_bonus/result"]
    assert "| `alarms[].stops_payouts` (**added**) |" in generated["alarms"]
    assert "| `craps/roll` | no |" in generated["published"]
    assert "| `void_roll` | `roll_id`, `clause` (`2`, `3` or `6`) |" in generated["requests"]


def test_update_fills_every_marker_and_refuses_a_missing_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = MQTT_MD.read_text(encoding="utf-8")
    emptied = text.replace(tables()["state"], "")
    assert emptied != text
    assert update(emptied) == text
    with pytest.raises(ValueError, match="no marker"):
        update(text.replace("<!-- contract: state -->", "<!-- not a marker -->"))
    copy = tmp_path / "mqtt.md"
    copy.write_text(emptied, encoding="utf-8")
    assert main([str(copy)]) == 0
    assert capsys.readouterr().out.startswith("wrote")
    assert copy.read_text(encoding="utf-8") == text
    assert main([str(copy)]) == 0
    assert "up to date" in capsys.readouterr().out
    assert main([]) == 2
