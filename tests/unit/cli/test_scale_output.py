"""Output that scales: at 2,000 and 10,000 nodes the default plan output is a screenful (one line
per moved PodGroup, the largest first; the card map only in -o wide, which maps every node), one
summary line per node pool, `status` wraps long
freed-node lists to 80 columns, and a long plan reports progress on stderr only on a terminal."""
from __future__ import annotations

import io
import json
import re

import pytest

from bench.generate import generate
from kubectl_repack import render
from kubectl_repack.commands import progress as progress_mod
from kubectl_repack.commands.progress import CLEAR, Progress
from kubectl_repack.kube import client as kclient
from kubectl_repack.kube import objects as kobjects
from planner.pools import pool_label

from .conftest import GUARDED, NOW, R, SEED3, flatten, run, seed3_objects

NODES = 2000


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """The 2,000-node synthetic cluster (bench.generate, seed 7) and its default and wide plans."""
    path = tmp_path_factory.mktemp("scale") / "cluster-2000.json"
    path.write_text(json.dumps(generate(nodes=NODES, seed=7)))
    out = {}
    for name, extra in (("default", []), ("wide", ["-o", "wide"])):
        r = run("plan", "--snapshot", path, "--resource", R, "--now", NOW, *extra)
        assert r.exit_code == 0, r.output
        assert r.stderr == ""  # no terminal: no progress
        out[name] = r.stdout
    return out


def section(text, title):
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i]), len(lines))
    return lines[start + 1:end]


def test_the_default_output_is_a_screenful_with_one_line_per_podgroup(big):
    text = big["default"]
    lines = text.splitlines()
    assert "CARDS (" not in text and lines[-1] == "Card map of every node: -o wide"
    rows = section(text, "MOVES BY PODGROUP")
    header, *body, last = rows
    assert header.split() == ["NAMESPACE", "WORKLOAD", "PODS", "CARDS", "FROM", "TO"]
    assert len(body) == render.MOVE_GROUPS
    groups = int(re.search(r"^Moved:.* of (\d+) PodGroup\(s\)", text, re.M).group(1))
    assert last == f"{groups - render.MOVE_GROUPS} more PodGroup(s): -o wide lists every pod"
    cards = [int(row.split()[3]) for row in body]
    assert cards == sorted(cards, reverse=True)        # the largest first
    # -o wide keeps one row per pod of every PodGroup
    assert len(section(big["wide"], "MOVES")) - 1 == int(re.search(r"^Moved:.* in (\d+) pod", text, re.M).group(1))
    assert len(lines) <= 60


def test_at_ten_thousand_nodes_the_default_output_fits_sixty_lines_of_eighty_columns(tmp_path, monkeypatch):
    """Before the output was bounded: 2,794 lines (1,114 MOVES rows, ~1,650 card-map rows, a 431-character message) before.
    (A word longer than the width, such as a long snapshot path, is never cut: the file is named
    relative to the working directory here.)"""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cluster-10000.json").write_text(json.dumps(generate(nodes=10000, seed=1)))
    r = run("plan", "--snapshot", "cluster-10000.json", "--resource", R, "--now", NOW, env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert len(lines) <= 60, r.stdout
    assert max(len(line) for line in lines) <= 80, [line for line in lines if len(line) > 80]
    # wrapped, not cut: the message and the freed-node list read to their end
    assert "Message:" in r.stdout and re.search(r"and \d+ more\)", r.stdout)


def test_wide_maps_every_node(big):
    rows = section(big["wide"], "CARDS")
    assert len(rows) == NODES and "unchanged" not in big["wide"].split("\nCARDS", 1)[1]


def test_one_summary_line_per_pool(big):
    for text in (big["default"], big["wide"]):
        header, *pools = section(text, "POOLS (by label accelerator-pool)")
        assert header.split() == ["POOL", "NODES", "CARDS", "USED", "EMPTY", "NODES", "FREED", "RECEIVING"]
        by_pool = {row.split()[0]: row.split() for row in pools}
        assert sorted(by_pool) == ["infer", "train-a", "train-b"]
        assert sum(int(row[1]) for row in by_pool.values()) == NODES
        freed = int(re.search(r"^Freed nodes:\s+(\d+)", text, re.M).group(1))
        assert sum(int(row[9]) for row in by_pool.values()) == freed
        for row in by_pool.values():  # EMPTY NODES before -> after grows by the pool's freed nodes
            assert int(row[8]) - int(row[6]) == int(row[9]), row


def test_small_plans_map_every_node_in_wide_and_count_nothing():
    r = run("plan", "--snapshot", SEED3, "-f", GUARDED, "--now", NOW, "-o", "wide")
    rows = section(r.stdout, "CARDS")
    assert [row.split()[0] for row in rows] == ["ascend-node-01", "ascend-node-02", "ascend-node-03"]
    assert "unchanged" not in r.stdout


def test_pools_without_a_pool_label_group_by_card_count():
    import planner

    how, pools = render.node_pools(planner.load_objects(flatten(seed3_objects())), R)
    assert how == "label accelerator-pool" and set(pools.values()) == {"ascend-npu"}
    objs = flatten(seed3_objects())
    for o in objs:
        if o.get("kind") == "Node":
            o["metadata"]["labels"] = {"kubernetes.io/hostname": o["metadata"]["name"]}
    how, pools = render.node_pools(planner.load_objects(objs), R)
    assert how == "card count" and set(pools.values()) == {"8-card"}


@pytest.mark.parametrize("keys, chosen", [
    ({"karpenter.sh/nodepool", "accelerator-pool"}, "karpenter.sh/nodepool"),
    ({"cloud.google.com/gke-nodepool", "node.kubernetes.io/instance-type"}, "cloud.google.com/gke-nodepool"),
    ({"example.com/gpu-node-pool", "zone"}, "example.com/gpu-node-pool"),
    ({"node.kubernetes.io/instance-type", "zone"}, "node.kubernetes.io/instance-type"),
    ({"zone"}, ""),
])
def test_the_pool_label(keys, chosen):
    assert pool_label(keys) == chosen


# ---------- status ----------

def _stored(freed_plan, freed_result):
    return {"metadata": {"name": "big"}, "spec": {"mode": "Execute", "goals": [{"resource": R}]},
            "status": {"phase": "Succeeded",
                       "plan": {"summary": {"freedNodeCount": len(freed_plan)}, "freedNodes": freed_plan},
                       "result": {"freedNodeCount": len(freed_result), "freedNodes": freed_result}}}


def test_status_wraps_long_freed_node_lists_to_80_columns():
    names = [f"train-a-{i:05d}" for i in range(422)]
    out = render.run_status(_stored(names, names[:400]))
    assert max(len(line) for line in out.splitlines()) <= 80
    rows = {line.split("   ")[0].strip(): line for line in out.splitlines() if line.startswith("Freed ")}
    assert rows["Freed"].split() == ["Freed", "422", "node(s),", "below", "400", "node(s),", "below"]
    plan_list = section(out, "FREED NODES (PLAN, 422)")
    result_list = section(out, "FREED NODES (RESULT, 400)")
    assert " ".join(plan_list).replace(",", " ").split() == names
    assert " ".join(result_list).replace(",", " ").split() == names[:400]


def test_status_keeps_short_freed_lists_in_the_table():
    out = render.run_status(_stored(["ascend-node-01"], []))
    assert "FREED NODES" not in out
    (row,) = [line for line in out.splitlines() if line.startswith("Freed ") and "nodes" not in line]
    assert row.split() == ["Freed", "ascend-node-01", "-"]


# ---------- progress ----------

class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_is_silent_off_a_terminal():
    stream = io.StringIO()
    p = Progress(stream)
    p("round", 1, 10)
    p.step("planning")
    p.done()
    assert not p.enabled and stream.getvalue() == ""


def test_progress_redraws_one_line_at_most_ten_times_a_second_and_clears_it():
    now = [0.0]
    stream = Terminal()
    p = Progress(stream, clock=lambda: now[0])
    p("listing", "pods", 500)
    p("listing", "pods", 1000)  # same instant: skipped
    now[0] = 0.2
    p("round", 3, 1983)
    p.done()
    assert stream.getvalue() == (CLEAR + "listing pods: 500" + CLEAR + "planning: round 3 of at most 1,983" + CLEAR)
    assert Progress.text("alternative", 2) == "planning: trying alternative plan 2"


def _serve_seed_pages(monkeypatch, page_size=2):
    """The seed cluster behind kube.objects' page reader, `page_size` objects a page."""
    objs = flatten(seed3_objects())

    def list_page(api, kind, limit, token):
        items = [o for o in objs if o.get("kind") == kind.kind]
        start = int(token or 0)
        nxt = start + page_size
        return {"items": items[start:nxt], "metadata": {"continue": str(nxt)} if nxt < len(items) else {}}
    monkeypatch.setattr(kclient, "connect", lambda *a, **kw: "api")
    monkeypatch.setattr(kobjects, "_list_page", list_page)


def test_live_plan_prints_no_progress_when_stderr_is_not_a_terminal(monkeypatch):
    _serve_seed_pages(monkeypatch)
    r = run("plan", "-f", GUARDED, "--now", NOW)
    assert r.exit_code == 0, r.output
    assert r.stderr == "" and CLEAR not in r.stdout


def test_live_plan_on_a_terminal_shows_listing_and_rounds_then_clears(monkeypatch):
    _serve_seed_pages(monkeypatch)
    monkeypatch.setattr(progress_mod, "REDRAW_SECONDS", 0.0)
    monkeypatch.setattr(progress_mod, "is_terminal", lambda stream: True)  # stderr as on a terminal
    r = run("plan", "-f", GUARDED, "--now", NOW)
    assert r.exit_code == 0, r.output
    shown = r.stderr.split(CLEAR)
    assert "listing nodes: 2" in shown and "listing nodes: 3" in shown and "listing pods: 2" in shown
    assert "planning: round 1 of at most 1" in shown
    assert r.stderr.endswith(CLEAR)  # the line is gone before the result
    assert CLEAR not in r.stdout and "Freed nodes:    1 (ascend-node-01)" in r.stdout


def test_snapshot_shows_listing_progress_only_on_a_terminal(monkeypatch, tmp_path):
    _serve_seed_pages(monkeypatch)
    r = run("snapshot", "-o", tmp_path / "a.json")
    assert r.exit_code == 0, r.output
    assert CLEAR not in r.stderr and r.stderr.startswith("wrote ")
    monkeypatch.setattr(progress_mod, "REDRAW_SECONDS", 0.0)
    monkeypatch.setattr(progress_mod, "is_terminal", lambda stream: True)
    r = run("snapshot", "-o", tmp_path / "b.json")
    assert r.exit_code == 0, r.output
    shown = r.stderr.split(CLEAR)
    assert "listing pods: 2" in shown and shown[-1].startswith("wrote ")
    assert (tmp_path / "a.json").read_text() == (tmp_path / "b.json").read_text()


def test_status_shows_the_vacated_nodes_and_who_took_them():
    """RELIEF-4 and EXEC-6: a planned node a waiting job took once the run vacated it is not free, and status
    says who uses it; a run without status.result.vacatedNodes (the Go implementation's) has no row."""
    obj = _stored(["ascend-node-01", "ascend-node-02"], ["ascend-node-02"])
    obj["status"]["result"]["vacatedNodes"] = [
        {"node": "ascend-node-01", "takenBy": ["repack-demo/ascend-large-training"]}, {"node": "ascend-node-02"}]
    out = render.run_status(obj)
    lines = out.splitlines()
    (row,) = [line for line in lines if line.startswith("Vacated nodes")]
    assert row.split() == ["Vacated", "nodes", "2", "2", "(1", "in", "use)"]
    assert lines[lines.index(row) - 1].startswith("Freed nodes")
    assert section(out, "VACATED NODES IN USE (1 of 2)") == [
        "NODE             TAKEN BY", "ascend-node-01   repack-demo/ascend-large-training"]
    plain = render.run_status(_stored(["ascend-node-01"], ["ascend-node-01"]))
    assert "Vacated" not in plain and "VACATED" not in plain
