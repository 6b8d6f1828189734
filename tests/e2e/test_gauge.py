"""The live fragmentation gauge on the installed controller (POLICY-3), on the real
control plane: `kubectl repack install` with the image hack/build-image.sh built, the seed's layout
on three NPU nodes and an idle fourth of another pool (which the seed's jobs may not use), in two
HyperNodes, the seed's ascend-large-training waiting for fragmentation.

The controller's /metrics, read from its pod (as test_installed.py reads the webhook's), must say
what `kubectl repack plan` (-o json: fragBeforePercent; its summary: providers, occupied, the
theoretical minimum; its POOLS and HYPERNODES tables: free whole nodes) and `kubectl repack why`
(the gang blocked by fragmentation) say about the same state, both before and after the seed's
Execute, refreshed by the controller itself (every minute, as installed); and the Execute moves
the controller's run, eviction and freed-node counters by what the run's status says. Every
metric the Grafana dashboard (config/grafana) queries is in the scrape.
"""
from __future__ import annotations

import json
import re
import time
import urllib.request
import uuid

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.helpers import repack, wait_for
from tests.e2e.test_installed import _tried, installed, installed_pod  # noqa: F401 - installed is a fixture
from tests.grafana import dashboard_metric_names
from tests.harness import NPU_RESOURCE, npu_node
from kubectl_repack.deploy import manifests
from kubectl_repack.deploy.parts import CONTROLLER_HEALTH_PORT

pytestmark = pytest.mark.e2e

TOPOLOGY = ("topology.volcano.sh", "v1alpha1", "hypernodes")
REFRESH_TIMEOUT = 180      # the installed controller refreshes every minute; a read of a few seconds more
FIGURES: dict = {}


def scrape(core) -> dict:
    """{(name, sorted labels): value} of the controller's /metrics, read from its pod."""
    pod = installed_pod(core, manifests.CONTROLLER_NAME)
    assert pod is not None and pod.status.pod_ip, "no single live controller pod"
    with urllib.request.urlopen(f"http://{pod.status.pod_ip}:{CONTROLLER_HEALTH_PORT}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))))


def gauge_of(samples) -> dict:
    """The gauge of the NPU resource, shaped as `plan_figures` shapes plan's."""
    res = NPU_RESOURCE
    pools = {dict(k[1])["pool"]: int(v) for k, v in samples.items()
             if k[0] == "repack_free_whole_nodes" and dict(k[1]).get("resource") == res}
    hypernodes = {dict(k[1])["hypernode"]: int(v) for k, v in samples.items()
                  if k[0] == "repack_hypernode_free_whole_nodes" and dict(k[1]).get("resource") == res}
    return {"frag": value(samples, "repack_fragmentation_percent", resource=res),
            "providers": value(samples, "repack_provider_nodes", resource=res),
            "occupied": value(samples, "repack_occupied_nodes", resource=res),
            "minimum": value(samples, "repack_theoretical_min_nodes", resource=res),
            "pools": pools, "hypernodes": hypernodes}


def _table(text, title_prefix) -> list:
    """Rows (whitespace-split) of the plan output's table whose title starts with `title_prefix`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title_prefix))
    rows = []
    for line in lines[start + 2:]:       # title, header
        if not line.strip():
            break
        rows.append(line.split())
    return rows


def plan_figures(kubeconfig, hypernodes) -> dict:
    """What `kubectl repack plan` reports for the NPU resource now: -o json's fragBeforePercent, the
    summary's providers / occupied before / theoretical minimum, empty nodes before per pool (POOLS)
    and free nodes before per HyperNode (HYPERNODES; -o wide lists every one)."""
    js = repack(kubeconfig, "plan", "--resource", NPU_RESOURCE, "-o", "json")
    assert js.returncode == 0, js.stdout + js.stderr
    frag = json.loads(js.stdout)["status"]["plan"]["summary"]["fragBeforePercent"]
    wide = repack(kubeconfig, "plan", "--resource", NPU_RESOURCE, "-o", "wide")
    assert wide.returncode == 0, wide.stdout + wide.stderr
    m = re.search(r"^Nodes:\s+(\d+) providers, occupied (\d+) -> \d+, theoretical minimum (\d+)$", wide.stdout, re.M)
    assert m, wide.stdout
    # POOL NODES CARDS USED(a -> b) EMPTY(a -> b) FREED RECEIVING
    pools = {row[0]: int(row[6]) for row in _table(wide.stdout, "POOLS (")}
    # HYPERNODE TIER NODES FREE(a -> b)
    rows = {row[0]: int(row[3]) for row in _table(wide.stdout, "HYPERNODES (")}
    assert set(rows) >= set(hypernodes), wide.stdout
    return {"frag": frag, "providers": int(m.group(1)), "occupied": int(m.group(2)), "minimum": int(m.group(3)),
            "pools": pools, "hypernodes": rows}


def gauge_equals_plan(core, kubeconfig, hypernodes, expect_blocked, label):
    """Wait for a refresh of the controller's gauge after now, with the state unchanged from the
    plan read before it to the one read after it; then the gauge must be plan's figures."""
    before = plan_figures(kubeconfig, hypernodes)
    asked = time.time()
    t0 = time.monotonic()
    samples = wait_for(f"a gauge refresh after {label}", lambda: (
        lambda s: s if (value(s, "repack_gauge_last_refresh_timestamp_seconds") or 0) > asked else None)(scrape(core)),
        timeout=REFRESH_TIMEOUT, interval=2)
    FIGURES[f"refresh_wait_{label}_seconds"] = round(time.monotonic() - t0, 1)
    after = plan_figures(kubeconfig, hypernodes)
    assert before == after, f"the state changed while waiting for the gauge ({label}): {before} != {after}"
    gauge = gauge_of(samples)
    print(f"\n{label}: plan {after}\n{label}: gauge {gauge} (refresh took "
          f"{value(samples, 'repack_gauge_refresh_duration_seconds'):.2f}s)")
    assert gauge == {k: (float(v) if not isinstance(v, dict) else v) for k, v in after.items()}, (gauge, after)
    assert value(samples, "repack_pending_blocked_podgroups", resource=NPU_RESOURCE) == expect_blocked
    return samples, after


def create_hypernodes(custom, tag, nodes):
    """Tier-1 HyperNodes `<tag>-a` = {node 01, node 02} and `<tag>-b` = {node 03, the spare}."""
    made = []
    for name, members in ((f"{tag}-a", nodes[:2]), (f"{tag}-b", nodes[2:])):
        custom.create_cluster_custom_object(*TOPOLOGY, {
            "apiVersion": "/".join(TOPOLOGY[:2]), "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": m}}}
                                            for m in members]}})
        made.append(name)
    return made


def delete_hypernodes(custom, names):
    for name in names:
        try:
            custom.delete_cluster_custom_object(*TOPOLOGY, name)
        except ApiException as e:
            if e.status != 404:
                raise


def test_the_gauge_is_plans_figures_and_the_counters_follow_an_execute(
        installed, real_node, control_plane, node_agent, fake_nodes, make_namespace, tmp_path):  # noqa: F811
    from tests.e2e.execute_helpers import (build_seed_layout, cli, delete_runs, execute_run, running_on, seed_nodes,
                                           unique, vcjob, wait_running, write_run)

    api = control_plane.api_client
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    kubeconfig = control_plane.kubeconfig
    nodes = seed_nodes()
    tag = f"gauge-{uuid.uuid4().hex[:4]}"
    spare = f"ascend-spare-{tag}"
    hypernodes = create_hypernodes(custom, tag, nodes + (spare,))
    name = unique("gauge-execute")
    try:
        ns = make_namespace("repack-demo")
        build_seed_layout(api, fake_nodes, ns, nodes)
        # idle, and of a pool none of the seed's jobs may use: a free whole node before and after
        fake_nodes(npu_node(spare, cards=8, pool="ascend-spare"))
        custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", ns, "jobs", vcjob(
            "ascend-large-training", {"workload-type": "training"}, [("worker", 2, 4)],
            {"accelerator-pool": "ascend-npu"}))
        wait_for("vc-scheduler to try ascend-large-training", lambda: _tried(custom, ns, "ascend-large-training"),
                 timeout=120)
        assert running_on(core, ns, "ascend-large-training") is None
        why = repack(kubeconfig, "why", "vcjob/ascend-large-training", "-n", ns)
        assert why.returncode == 0 and "Fragmentation" in why.stdout, why.stdout + why.stderr

        # 1. the seed, fragmented, and the large job blocked by it
        samples, seen = gauge_equals_plan(core, kubeconfig, hypernodes, 1, "the seed")
        assert (seen["frag"], seen["providers"], seen["occupied"], seen["minimum"]) == (25, 4, 3, 2), seen
        assert seen["pools"] == {"ascend-npu": 0, "ascend-spare": 1}, seen
        assert seen["hypernodes"] == {hypernodes[0]: 0, hypernodes[1]: 1}, seen
        before = samples

        # 2. the seed's Execute, carried out by the installed controller
        r = cli(kubeconfig, "apply", "-f", write_run(tmp_path, execute_run(name)), "--cooldown", "0s", "-o", "json")
        assert r.exit_code == 0, r.output
        run = json.loads(r.stdout)
        st = run["status"]
        assert st["phase"] == "Succeeded", st
        reason = next(c["reason"] for c in st["conditions"] if c["type"] == "Complete")
        evicted = sum(1 for rec in st["relocations"] if rec["eviction"]["phase"] == "Accepted")
        assert evicted == 2, st["relocations"]
        wait_running(api, ns, "ascend-large-training")     # node 01, vacated, now holds it

        def delta(after, metric, **labels):
            return (value(after, metric, **labels) or 0) - (value(before, metric, **labels) or 0)
        samples, seen = gauge_equals_plan(core, kubeconfig, hypernodes, 0, "the Execute")
        assert (seen["frag"], seen["occupied"], seen["minimum"]) == (0, 3, 3), seen
        assert seen["pools"] == {"ascend-npu": 0, "ascend-spare": 1}, seen
        assert delta(samples, "repack_runs_total", mode="Execute", phase="Succeeded", reason=reason) == 1
        assert delta(samples, "repack_evictions_total") == evicted
        assert delta(samples, "repack_run_freed_nodes_count") == 1
        assert delta(samples, "repack_run_freed_nodes_sum") == st["result"]["freedNodeCount"]

        # 3. every metric the dashboard queries is served, with samples
        scraped = {n for n, _ in samples}
        missing = sorted(dashboard_metric_names() - scraped)
        assert not missing, f"the Grafana dashboard queries metrics the controller did not serve: {missing}"
        print(f"\ndashboard metrics scraped: {sorted(dashboard_metric_names())}\nwaits: {FIGURES}")
    finally:
        delete_runs(api, [name])
        delete_hypernodes(custom, hypernodes)
