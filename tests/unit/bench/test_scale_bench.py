"""bench.scale: one real `kubectl-repack plan` process measured on a tiny generated cluster
(its load / plan split and peak RSS come back), and the table and targets rendered from figures.
The full run is `python -m bench.scale`."""
import json

from bench import report, scale
from bench.generate import generate


def test_one_run_times_the_real_command_and_splits_it(tmp_path):
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": generate(30, 3)}))
    r = scale.measure(path, "budget", timeout=120)
    assert 0 < r["load_s"] and 0 < r["plan_s"] and r["rest_s"] > 0
    assert r["process_s"] >= r["load_s"] + r["plan_s"]
    assert 10 < r["peak_rss_mb"] < 2048 and r["process_cpu_s"] > 0
    assert r["nodes"] == 30 and r["outcome"] == "Succeeded" and r["freed"] >= 0


def _entry(size, spec, process, tree=False, rss=500.0):
    return {"size": size, "tree": tree, "spec": spec, "repeats": 3, "process_s": process, "load_s": process / 4,
            "plan_s": process / 2, "rest_s": process / 4, "process_cpu_s": process, "peak_rss_mb": rss,
            "freed": 10, "moves": 20, "frag_before": 50, "frag_after": 40, "commit": "abc", "loadavg_at_start": [1.0]}


DOC = {"machine": {"cpus": 2}, "runs": [
    _entry(1000, "none", 0.7), _entry(1000, "budget", 0.9),
    _entry(10000, "none", 4.0), _entry(10000, "budget", 4.5),
    _entry(25000, "none", 10.0), _entry(25000, "budget", 14.0, rss=1100.0),
    _entry(10000, "none", 30.0, tree=True)]}


def test_the_table_gives_every_run_and_the_growth_ratio():
    text = scale.table(DOC)
    assert sum(line.startswith("| ") for line in text.splitlines()) == 8      # header and 7 runs
    assert "| 10,000 | 3 tiers | no budget | 3 | **30.00** |" in text
    assert ("time(25k) / time(10k), whole process: no budget: 2.50 (CPU 2.50); "
            "maxPerRun podGroups 20, 160 cards: 3.11 (CPU 3.11)") in text


def test_the_targets_are_judged_on_the_runs_without_a_tree():
    rows = {line.split(" | ")[0]: line for line in report.targets(None, DOC).splitlines()}
    assert rows["| 1,000 nodes ≤ 0.8 s, whole `kubectl-repack plan` process"].endswith("**not met** |")
    assert rows["| 10,000 nodes ≤ 5 s, whole `kubectl-repack plan` process"].endswith("| met |")
    assert rows["| 25,000 nodes ≤ 15 s, whole `kubectl-repack plan` process"].endswith("| met |")
    assert rows["| peak RSS ≤ 1 GB at 25,000 nodes"].endswith("**not met** |")
    assert "no budget: 2.50; maxPerRun podGroups 20, 160 cards: 3.11 | **not met** |" in \
        rows["| time(25k) / time(10k) ≤ 2.8"]
