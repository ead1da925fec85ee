"""The example alert rules and Grafana dashboards of docs/floor/monitoring/: well formed,
and every lammer series they query is one lammer serves (declared in the collectors'
``FAMILIES``). ``promtool check rules`` too where Prometheus's tools are installed (Debian's
``prometheus`` package; not installed by ``make``: see docs/floor/monitoring.md)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # PyYAML (mkdocs's), without stubs here

from daemon.metrics import FAMILIES as TABLE
from display.web.metrics import FAMILIES as WEB
from records.metrics import FAMILIES as RECORDS

FOLDER = Path(__file__).resolve().parents[2] / "docs" / "floor" / "monitoring"
SERIES = re.compile(r"\blammer_[a-z_]+\b")
DURATION = re.compile(r"[0-9]+[smhd]")


def _served() -> set[str]:
    names: set[str] = set()
    for family in (*TABLE, *WEB, *RECORDS):
        names.add(family.exposed)
        if family.kind == "histogram":
            names |= {f"{family.name}_{s}" for s in ("bucket", "sum", "count")}
    return names


def _series(expr: str) -> set[str]:
    return set(SERIES.findall(expr))


def _rules() -> list[dict[str, Any]]:
    document = yaml.safe_load((FOLDER / "lammer-alerts.yml").read_text(encoding="utf-8"))
    assert set(document) == {"groups"}
    rules: list[dict[str, Any]] = []
    for group in document["groups"]:
        assert set(group) == {"name", "rules"}
        rules += group["rules"]
    return rules


def test_the_alert_rules_are_well_formed_and_query_only_what_lammer_serves() -> None:
    served = _served()
    rules = _rules()
    names = [rule["alert"] for rule in rules]
    assert len(names) == len(set(names))
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
        assert rule["labels"]["severity"] in {"warning", "critical"}
        assert {"summary", "description"} <= set(rule["annotations"])
        assert DURATION.fullmatch(rule.get("for", "0s")), rule
        assert rule["expr"].count("(") == rule["expr"].count(")"), rule["alert"]
        assert _series(rule["expr"]) <= served, rule["alert"]


def test_the_alerts_the_issue_asks_for() -> None:
    by_name = {rule["alert"]: rule for rule in _rules()}
    offline = by_name["LammerTableOffline"]
    assert offline["for"] == "2m"
    assert 'up{job="lammer-tables"} == 0' in offline["expr"]
    assert "< 24" in by_name["LammerDiskUnder24Hours"]["expr"]
    assert "lammer_device_link_errors_total" in by_name["LammerLinkErrorsRising"]["expr"]
    assert "lammer_records_feed_lag_seconds > 60" in by_name["LammerRecordsLagging"]["expr"]
    assert 'lammer_alarms_active{code="SOFTWARE"}' in by_name["LammerSoftwareAlarm"]["expr"]


def test_promtool_checks_the_rules_where_it_is_installed() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        return  # not on this machine: the checks above are all there is
    done = subprocess.run(
        [promtool, "check", "rules", str(FOLDER / "lammer-alerts.yml")],
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()


def test_the_dashboards_query_only_what_lammer_serves() -> None:
    served = _served()
    uids = set()
    for name in ("grafana-table.json", "grafana-floor.json"):
        dashboard = json.loads((FOLDER / name).read_text(encoding="utf-8"))
        assert dashboard["uid"] not in uids
        uids.add(dashboard["uid"])
        assert dashboard["title"].startswith("lammer")
        ids = [panel["id"] for panel in dashboard["panels"]]
        assert len(ids) == len(set(ids))
        for panel in dashboard["panels"]:
            assert panel["targets"], panel["title"]
            for target in panel["targets"]:
                expr = target["expr"]
                assert expr.count("(") == expr.count(")"), (name, panel["title"])
                assert _series(expr) <= served, (name, panel["title"], expr)
