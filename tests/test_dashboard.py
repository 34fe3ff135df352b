"""``deploy/grafana/areamem.json``: a dashboard Grafana imports as it is, whose queries name
only metrics and labels a real proxy exposes; and the README's Metrics table lists exactly
the metric families ``GET /metrics`` serves, with their types and labels."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.metrics import MetricWrapperBase

from proxy.http.metrics import Metrics

from .conftest import Proxy

pytestmark = pytest.mark.e2e

Json = dict[str, Any]

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "deploy" / "grafana" / "areamem.json"
README = ROOT / "README.md"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
PANEL_TYPES = {"row", "stat", "timeseries"}
GRID_WIDTH = 24
TOP_LEVEL = {
    "__inputs",
    "__requires",
    "annotations",
    "editable",
    "panels",
    "schemaVersion",
    "templating",
    "time",
    "title",
    "uid",
}
GRAFANA_VARIABLES = {"__rate_interval", "__range", "__interval"}
SERVER_LABELS = {"job", "instance"}  # added by Prometheus to every scraped series

_METRIC = re.compile(r"\bareamem_[a-z_]+\b")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_RANGE = re.compile(r"\[([^\]]*)\]")
_VARIABLE = re.compile(r"\$\{?(\w+)")
_BY = re.compile(r"\bby \(([^)]*)\)")
_TYPE_LINE = re.compile(r"^# TYPE (\S+) (\S+)$", re.MULTILINE)
_SERIES_SUFFIXES = {"histogram": ("_bucket", "_sum", "_count")}


def _dashboard() -> Json:
    return dict(json.loads(DASHBOARD.read_text()))


def _panels(dashboard: Json) -> list[Json]:
    """Every panel, those inside a collapsed row included."""
    found: list[Json] = []
    for panel in dashboard["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def _queries(dashboard: Json) -> list[str]:
    """Every PromQL query: panel targets, annotations and template variables."""
    queries = [t["expr"] for p in _panels(dashboard) for t in p.get("targets", [])]
    queries += [a["expr"] for a in dashboard["annotations"]["list"] if "expr" in a]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            queries.append(query["query"] if isinstance(query, dict) else query)
    return queries


def _balanced(expr: str) -> bool:
    """Brackets nest and close (outside string literals)."""
    closing = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    for char in _STRING.sub('""', expr):
        if char in "([{":
            stack.append(char)
        elif char in closing and (not stack or stack.pop() != closing[char]):
            return False
    return not stack


def _declared() -> dict[str, tuple[str, set[str]]]:
    """Each metric family the proxy registers: its exposed name, type and label names."""
    families: dict[str, tuple[str, set[str]]] = {}
    for metric in vars(Metrics()).values():
        if isinstance(metric, MetricWrapperBase):
            assert metric._type is not None  # set by each metric class (Counter, Gauge, ...)
            exposed = metric._name + ("_total" if metric._type == "counter" else "")
            families[exposed] = (metric._type, set(metric._labelnames))
    return families


def _exposed(text: str) -> dict[str, str]:
    """Family name → type, from the exposition's ``# TYPE`` lines (the ``_created``
    gauges prometheus_client adds beside every counter and histogram left out)."""
    return {
        name: kind
        for name, kind in _TYPE_LINE.findall(text)
        if name.startswith("areamem_") and not (name.endswith("_created") and kind == "gauge")
    }


def _series_names(families: dict[str, str]) -> set[str]:
    """The sample names the families expose (a histogram's ``_bucket``, ``_sum``, ...)."""
    return {
        name + suffix
        for name, kind in families.items()
        for suffix in _SERIES_SUFFIXES.get(kind, ("",))
    }


def _documented() -> dict[str, tuple[str, set[str]]]:
    """The README's Metrics table: exposed name → (type, label names)."""
    text = README.read_text()
    section = text.split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, tuple[str, set[str]]] = {}
    for line in section.splitlines():
        if line.startswith("| `areamem_"):
            name, kind, labels, meaning = (cell.strip() for cell in line.strip("|").split(" | "))
            assert meaning, line
            exposed = _METRIC.findall(name)[0]
            rows[exposed] = (kind, set(re.findall(r"`([a-z_]+)`:", labels)))
    return rows


async def _metrics_after_a_chat(proxy: Proxy) -> str:
    """``GET /metrics`` once a chat request has been answered and settled."""
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": "hello"}]
        )
    await proxy.settle()
    async with aiohttp.ClientSession() as http, http.get(proxy.url + "/metrics") as response:
        assert response.status == 200
        return await response.text()


# -- the file Grafana imports ------------------------------------------------------------


def test_the_dashboard_declares_what_an_import_asks_for() -> None:
    dashboard = _dashboard()
    assert set(dashboard) >= TOP_LEVEL
    assert dashboard["id"] is None and dashboard["uid"] and dashboard["schemaVersion"] >= 36
    assert dashboard["__inputs"] == [
        {
            "name": "DS_PROMETHEUS",
            "label": "Prometheus",
            "description": dashboard["__inputs"][0]["description"],
            "type": "datasource",
            "pluginId": "prometheus",
            "pluginName": "Prometheus",
        }
    ]
    required = {(r["type"], r["id"]) for r in dashboard["__requires"]}
    used = {("panel", p["type"]) for p in _panels(dashboard) if p["type"] != "row"}
    assert {("grafana", "grafana"), ("datasource", "prometheus")} | used <= required
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    source = variables["datasource"]
    assert (source["type"], source["query"]) == ("datasource", "prometheus")
    assert source["current"]["value"] == "${DS_PROMETHEUS}"  # the import's choice
    body = json.dumps({k: v for k, v in dashboard.items() if k != "__inputs"})
    assert set(re.findall(r"\$\{(\w+)\}", body)) == {"DS_PROMETHEUS", "datasource"}


def test_every_panel_is_complete_with_a_unique_id() -> None:
    panels = _panels(_dashboard())
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) for i in ids)
    for panel in panels:
        where = f"panel {panel['id']} {panel.get('title')!r}"
        assert panel["type"] in PANEL_TYPES, where
        grid = panel["gridPos"]
        assert all(isinstance(grid[k], int) for k in ("x", "y", "w", "h")), where
        assert grid["x"] >= 0 and grid["y"] >= 0 and grid["h"] >= 1, where
        assert grid["w"] >= 1 and grid["x"] + grid["w"] <= GRID_WIDTH, where
        if panel["type"] == "row":
            continue
        assert panel["title"] and panel["datasource"] == DATASOURCE, where
        targets = panel["targets"]
        assert targets and len({t["refId"] for t in targets}) == len(targets), where
        for target in targets:
            assert target["datasource"] == DATASOURCE and target["expr"].strip(), where


def test_panels_do_not_overlap() -> None:
    taken: dict[tuple[int, int], int] = {}
    for panel in _dashboard()["panels"]:  # a collapsed row's panels lie under it when open
        grid = panel["gridPos"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in taken, f"panels {taken.get((x, y))} and {panel['id']}"
                taken[(x, y)] = panel["id"]
    assert len(taken) > GRID_WIDTH


def test_queries_are_well_formed() -> None:
    dashboard = _dashboard()
    defined = {v["name"] for v in dashboard["templating"]["list"]} | GRAFANA_VARIABLES
    queries = _queries(dashboard)
    assert len(queries) > 20
    for expr in queries:
        assert _balanced(expr), expr
        assert _METRIC.search(expr), expr
        assert set(_VARIABLE.findall(expr)) <= defined, expr
        assert set(_RANGE.findall(expr)) <= {"$__rate_interval", "$__range"}, expr
        if "histogram_quantile" in expr:
            assert all(name.endswith("_bucket") for name in _METRIC.findall(expr)), expr
            assert all("le" in labels.split(", ") for labels in _BY.findall(expr)), expr


# -- against a real proxy ----------------------------------------------------------------


async def test_every_queried_metric_and_label_is_one_the_proxy_exposes(proxy: Proxy) -> None:
    text = await _metrics_after_a_chat(proxy)
    assert 'areamem_requests_total{api="chat",status="200",stream="false"} 1.0' in text
    exposed = _series_names(_exposed(text))
    declared = _declared()
    labels_of = {
        series: labels
        for name, (kind, labels) in declared.items()
        for series in _series_names({name: kind})
    }
    for expr in _queries(_dashboard()):
        names = set(_METRIC.findall(expr))
        assert names <= exposed, f"{sorted(names - exposed)} not exposed: {expr}"
        known = set().union(*(labels_of[name] for name in names)) | SERVER_LABELS | {"le"}
        for grouping in _BY.findall(expr):
            assert set(grouping.split(", ")) <= known, expr


async def test_the_readme_documents_exactly_the_exposed_metrics(proxy: Proxy) -> None:
    exposed = _exposed(await _metrics_after_a_chat(proxy))
    documented = _documented()
    assert len(exposed) >= 15
    assert {name: kind for name, (kind, _) in documented.items()} == exposed
    assert {name: labels for name, (_, labels) in documented.items()} == {
        name: labels for name, (_, labels) in _declared().items()
    }
    assert "deploy/grafana/areamem.json" in README.read_text()
