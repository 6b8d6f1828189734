"""The trace replay (kubectl_repack.simulate, bench.replay): the engine's semantics on hand-built
traces, determinism, bad input through the real entry point, and a smoke test that fails if the
repack arm stops helping a gang that waits behind fragmentation. Synthetic data only."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kubectl_repack.simulate.engine import EngineSettings, Replay
from kubectl_repack.simulate.run import replay_arms
from kubectl_repack.simulate.trace import JobSpec, NodeSpec, Workload

REPO = Path(__file__).resolve().parents[3]


def nodes(count, gpus=8):
    return [NodeSpec(f"n{i}", 96000, 786432, gpus, "G2") for i in range(count)]


def job(name, submit, pods=1, gpus=1, duration=1000.0, min_available=None, kind=None):
    return JobSpec(name, float(submit), kind or ("gang" if pods > 1 else "background"), pods, gpus, 1000 * gpus,
                   1024 * gpus, (), float(duration), pods if min_available is None else min_available)


def fragmented(gang_pods=2):
    """4 full 8-card nodes of one-card pods; every other pod ends at t=100, leaving each node half
    full (16 cards free, no node empty); then a 2x8 gang arrives that needs two empty nodes."""
    jobs = [job(f"bg-{i:02d}", 0, duration=100.0 if i % 2 == 0 else 100000.0) for i in range(32)]
    jobs.append(job("gang-0", 200, pods=gang_pods, gpus=8, duration=3600.0))
    return jobs


def replay(node_list, jobs, horizon, **settings):
    r = Replay(node_list, jobs, EngineSettings(**settings), 0.0, horizon)
    return r


def test_the_repack_arm_starts_a_gang_that_waits_behind_fragmentation():
    doc = replay_arms(nodes(4), None, Workload(days=2.0, warmup_days=0.0), ["none", "repack-pending"], seed=1,
                      jobs=fragmented())
    none, repack = doc["arms"]["none"]["wait_s"]["gang"]["p50"], doc["arms"]["repack-pending"]["wait_s"]["gang"]["p50"]
    assert none > 90000                          # without a repack it waits for the long pods to end
    assert repack < 1200 and repack < none / 50  # the targeted run makes room within minutes
    assert doc["arms"]["repack-pending"]["evicted_podgroups"] <= 8
    assert doc["arms"]["repack-pending"]["runs"] >= 1


def test_a_gang_binds_all_or_nothing():
    # three nodes 5/8 full: 17 cards free, but only one node can take an 8-card pod
    jobs = [job(f"bg{i}", i, gpus=5, duration=10000.0) for i in range(3)]
    jobs += [job("gang", 10, pods=2, gpus=8, duration=100.0), job("small", 20, pods=2, gpus=4, duration=100.0)]
    r = replay(nodes(4), jobs, 5000.0)
    r.run()
    gang, small = r.jobs["replay/gang"], r.jobs["replay/small"]
    assert gang.first_start is None and not gang.bound          # one node free: no pod of it binds
    assert all(r.jobs[f"replay/bg{i}"].first_start == i for i in range(3))
    assert small.first_start == 20.0                             # the job behind it is not held up


def test_a_gang_below_min_available_restarts_and_loses_work_since_its_checkpoint():
    r = replay(nodes(2), [job("gang", 0, pods=2, gpus=8, duration=10000.0)], 20000.0, checkpoint_s=1800.0)
    r.at(4000.0, lambda: r.evict([r.jobs["replay/gang"].pods[0]]))
    r.run()
    g = r.jobs["replay/gang"]
    # 4000 s done, checkpoint at 3600: 400 s of 16 cards lost, both pods evicted, progress 3600 kept
    assert r.gpu_seconds_lost == pytest.approx(400 * 16)
    assert r.evicted_pods == 2 and r.evicted_podgroups == 1 and g.restarts == 1
    assert g.done and g.progress == pytest.approx(3600.0)


def test_an_eviction_above_min_available_costs_only_that_pods_work():
    r = replay(nodes(3), [job("elastic", 0, pods=3, gpus=8, duration=10000.0, min_available=2)], 20000.0)
    r.at(2000.0, lambda: r.evict([r.jobs["replay/elastic"].pods[2]]))
    r.run()
    g = r.jobs["replay/elastic"]
    assert r.gpu_seconds_lost == pytest.approx(200 * 8)      # 2000 s done, checkpoint at 1800
    assert r.evicted_pods == 1 and r.evicted_podgroups == 0 and g.restarts == 0
    assert g.done and g.progress == 0.0       # the job ran on: no progress taken back


def test_the_replay_is_deterministic_for_a_seed():
    w = Workload(days=0.3, warmup_days=0.05)
    from kubectl_repack.simulate.trace import synthetic_nodes, synthetic_shapes
    args = (synthetic_nodes(16, 3), synthetic_shapes(300, 3), w, ["none", "repack-cron"])
    a, b = replay_arms(*args, seed=5), replay_arms(*args, seed=5)
    for doc in (a, b):
        for res in doc["arms"].values():
            for timing in ("planner_cpu_s", "replay_wall_s", "replay_cpu_s"):
                res.pop(timing)
    assert a == b
    c = replay_arms(*args, seed=6)
    assert c["settings"]["jobs_generated"] != a["settings"]["jobs_generated"] or c["arms"] != a["arms"]


def run_bench(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "bench.replay", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"
POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"


@pytest.mark.parametrize("node_text,pod_text,where", [
    ("sn,cpu_milli,gpu,model\nx,1,8,G2\n", POD_HEADER + "p,1,1,1,1000,,LS,Running,0,10,0\n",
     "nodes.csv:1: column memory_mib"),
    (NODE_HEADER + "x,1,1,8,G2\n", POD_HEADER + "p,1,1,1,1000,,LS,Running,0,10,0\nq,1,1,1,1000,,LS,Running,-5,10,0\n",
     "pods.csv:3: column creation_time (9): -5 is negative"),
    (NODE_HEADER + "x,1,1,eight,G2\n", POD_HEADER, "nodes.csv:2: column gpu (4): 'eight' is not a number"),
])
def test_bad_trace_input_names_file_line_and_column(tmp_path, node_text, pod_text, where):
    (tmp_path / "nodes.csv").write_text(node_text)
    (tmp_path / "pods.csv").write_text(pod_text)
    out = tmp_path / "out.json"
    done = run_bench("--nodes", str(tmp_path / "nodes.csv"), "--pods", str(tmp_path / "pods.csv"), "--days", "0.1",
                     "--warmup-days", "0", "--arms", "none", "--json", str(out))
    assert done.returncode == 2, done.stderr
    assert where in done.stderr and "Traceback" not in done.stderr
    assert not out.exists()


def test_an_unknown_arm_is_refused_before_anything_runs(tmp_path):
    done = run_bench("--synthetic", "--arms", "none,repack-magic", "--json", str(tmp_path / "o.json"))
    assert done.returncode == 2 and "unknown arm 'repack-magic'" in done.stderr and "Traceback" not in done.stderr


def test_the_json_has_the_shape_the_checks_read(tmp_path):
    out = tmp_path / "o.json"
    done = run_bench("--synthetic", "--synthetic-nodes", "12", "--days", "0.2", "--warmup-days", "0.05",
                     "--arms", "none,repack-cron", "--seed", "2", "--json", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert doc["settings"]["seed"] == 2 and doc["settings"]["workload"]["load"] == 1.0
    for arm in ("none", "repack-cron"):
        res = doc["arms"][arm]
        assert {"jobs", "wait_s", "allocation_ratio", "evicted_pods", "evicted_podgroups", "gpu_seconds_lost"} <= set(res)
        for bucket in ("all", "gpus>=8", "gang"):
            assert {"p50", "p95", "p99"} <= set(res["wait_s"][bucket])


def test_a_bad_arm_setting_is_refused(tmp_path):
    done = run_bench("--synthetic", "--arms", "none", "--set", "nonsense", "--json", str(tmp_path / "o.json"))
    assert done.returncode == 2 and "--set: 'nonsense'" in done.stderr and "Traceback" not in done.stderr
