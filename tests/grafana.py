"""The Grafana dashboard shipped in config/grafana: its PromQL queries and the metric names they read
(parsed with promql-parser), for the unit test that checks them against the controller's metrics and
the e2e that finds them in a real scrape."""
from __future__ import annotations

import json
import re
from pathlib import Path

DASHBOARD = Path(__file__).resolve().parents[1] / "config" / "grafana" / "kubectl-repack.json"

# Grafana's built-in interval variables stand where PromQL has a duration.
_INTERVALS = re.compile(r"\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}")
_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$")


def load(path: Path = DASHBOARD) -> dict:
    return json.loads(path.read_text())


def queries(dashboard: dict) -> list:
    """(where, PromQL) of every panel target; the metric of every `label_values(metric, label)`
    variable as a query of that metric alone."""
    out = []
    for panel in dashboard.get("panels") or ():
        for target in panel.get("targets") or ():
            out.append((f"panel {panel['title']!r} target {target.get('refId')}", target["expr"]))
    for var in (dashboard.get("templating") or {}).get("list") or ():
        if var.get("type") != "query":
            continue
        q = var.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        m = _LABEL_VALUES.match(q or "")
        if not m:
            raise ValueError(f"variable {var['name']!r}: {q!r} is not label_values(metric, label)")
        out.append((f"variable {var['name']!r}", m.group(1)))
    return out


def metric_names(expr: str) -> set:
    """Every metric a PromQL expression selects (Grafana's interval variables read as 5m).
    ValueError when it does not parse or selects by anything but a metric name."""
    import promql_parser

    ast = promql_parser.parse(_INTERVALS.sub("5m", expr))
    names: set = set()

    def visit(node):
        if isinstance(node, promql_parser.VectorSelector):
            if not node.name:
                raise ValueError(f"{expr!r}: a selector without a metric name")
            names.add(node.name)
    promql_parser.walk(ast, visit)
    return names


def dashboard_metric_names(dashboard: dict | None = None) -> set:
    d = load() if dashboard is None else dashboard
    return set().union(*(metric_names(q) for _, q in queries(d)))
