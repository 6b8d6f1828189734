"""Helpers for the `kubectl repack apply` e2e tests: the seed's layout built by the real
vc-scheduler, Execute run files, running the CLI in-process or as a subprocess, and a pod watch
that records every pod deletion the API server performs (to prove no victim is evicted twice).

The seed layout (steps 2-5): three NPU nodes with 8 cards; the eligible VCJob
`ascend-batch-training` (2 workers x 1 card) alone on node 01; protected VCJobs pinned by
kubernetes.io/hostname fill nodes 02 and 03 to 7 cards. Node 01 is added alone first so Volcano
must put the batch job there; the job's template allows every pool node, so its re-created
workers may land on 02/03 after eviction.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid

import pytest
import yaml
from click.testing import CliRunner
from kubernetes import client, watch

from tests.harness import NPU_RESOURCE, npu_node
from tests.harness.controlplane import REPO_ROOT
from tests.e2e.helpers import vcjob, wait_for  # noqa: F401  (re-exported for test_apply)

GROUP, VERSION, PLURAL = "repack.volcano.sh", "v1alpha1", "repackruns"
ELIGIBLE = {"workload-type": "training", "repack.volcano.sh/eligible": "true",
            "repack.volcano.sh/protected": "false"}
PROTECTED = {"workload-type": "training", "repack.volcano.sh/protected": "true"}
LEASE_NAMESPACE = "repack-e2e-apply"


def running_on(core, ns, job):
    pods = [p for p in core.list_namespaced_pod(ns, label_selector=f"volcano.sh/job-name={job}").items
            if p.metadata.deletion_timestamp is None]
    if pods and all(p.status.phase == "Running" and p.spec.node_name for p in pods):
        return {p.metadata.name: (p.spec.node_name, p.metadata.uid) for p in pods}
    return None


def foreign_providers(core, mine):
    return sorted(n.metadata.name for n in core.list_node().items
                  if n.metadata.name not in mine and (n.status.allocatable or {}).get(NPU_RESOURCE, "0") != "0")


# How long the seed's jobs may take to run. Usually seconds; under a loaded 2-core machine (image
# builds, other suites) vc-scheduler was seen taking over 90 s twice in about ten full runs, with
# nothing in its log: a layout that is merely slow must not fail the test that needs it.
SCHEDULE_TIMEOUT = 240.0


def wait_running(api, ns, job):
    """`job`'s pods, all Running: {pod: (node, uid)}. On a timeout the failure says what the pods and
    the PodGroup showed last (phase, node, conditions), so a slow or stuck vc-scheduler can be told
    from a node that never runs the pods."""
    core = client.CoreV1Api(api)
    try:
        return wait_for(f"{job} Running", lambda: running_on(core, ns, job), timeout=SCHEDULE_TIMEOUT)
    except pytest.fail.Exception as e:
        pytest.fail(f"{e}\n{pending_state(api, ns, job)}")


def pending_state(api, ns, job):
    """What the API server says about `job`'s pods and PodGroup, one line each."""
    lines = []
    for p in client.CoreV1Api(api).list_namespaced_pod(ns, label_selector=f"volcano.sh/job-name={job}").items:
        conds = "; ".join(f"{c.type}={c.status} {c.reason or ''} {c.message or ''}".strip()
                          for c in (p.status.conditions or []))
        lines.append(f"pod {p.metadata.name}: phase {p.status.phase}, node {p.spec.node_name or '-'}; {conds}")
    for pg in client.CustomObjectsApi(api).list_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", ns, "podgroups")["items"]:
        if (pg["metadata"].get("ownerReferences") or [{}])[0].get("name") == job:
            st = pg.get("status") or {}
            conds = "; ".join(f"{c.get('type')}={c.get('status')} {c.get('reason', '')} {c.get('message', '')}".strip()
                              for c in st.get("conditions") or [])
            lines.append(f"podgroup {pg['metadata']['name']}: phase {st.get('phase')}; {conds}")
    return "\n".join(lines) or f"no pods and no PodGroup of {job}"


def seed_nodes():
    """The seed's three node names (ascend-node-01..03), made unique to one test. Volcano's
    scheduler can keep a deleted node's pods, and a node entry without its Node, when a node of the
    same name comes back at once; it then never schedules there (seen: a gang Pending for 240 s on
    ascend-node-02 right after the previous test deleted and this one re-created it)."""
    tag = uuid.uuid4().hex[:4]
    return tuple(f"ascend-node-0{i}-{tag}" for i in (1, 2, 3))


def build_seed_layout(api, fake_nodes, ns, nodes):
    """The seed's 3-node layout in namespace `ns` on `nodes` (3 names). Returns
    {"batch": {pod: (node, uid)}, "protected": {pod: (node, uid)}}."""
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    wait_for("NPU nodes of other tests to be gone", lambda: not foreign_providers(core, nodes) or None, timeout=90)
    fake_nodes(npu_node(nodes[0], cards=8))
    custom.create_namespaced_custom_object(
        "batch.volcano.sh", "v1alpha1", ns, "jobs",
        vcjob("ascend-batch-training", ELIGIBLE, [("worker", 2, 1)], {"accelerator-pool": "ascend-npu"}))
    batch = wait_running(api, ns, "ascend-batch-training")
    assert {n for n, _ in batch.values()} == {nodes[0]}, batch
    protected = {}
    for node, job, tasks in ((nodes[1], "online-serving-critical", [("entry", 1, 4), ("worker", 1, 3)]),
                             (nodes[2], "llm-pretrain-critical", [("master", 1, 3), ("worker", 1, 4)])):
        fake_nodes(npu_node(node, cards=8))
        custom.create_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", ns, "jobs",
            vcjob(job, PROTECTED, tasks, {"kubernetes.io/hostname": node}))
        placed = wait_running(api, ns, job)
        assert {n for n, _ in placed.values()} == {node}, placed
        protected.update(placed)
    # The PodGroups must carry the jobs' labels before the planner reads them.
    wait_for("3 PodGroups", lambda: len(custom.list_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", ns, "podgroups")["items"]) == 3)
    return {"batch": batch, "protected": protected}


def execute_spec(grace=0):
    """The spec of the seed's guarded run (step 4) turned into an Execute run (step 5)."""
    return {
        "mode": "Execute",
        "scope": {"podGroups": {"include": {"selector": {"matchLabels": {"repack.volcano.sh/eligible": "true"}}},
                                "exclude": {"selector": {"matchLabels": {"repack.volcano.sh/protected": "true"}}}},
                  "nodes": {"include": {"selector": {"matchLabels": {"accelerator-pool": "ascend-npu"}}}}},
        "goals": [{"resource": NPU_RESOURCE, "minFragImprovementPercent": 10}],
        "maxPerRun": {"podGroups": 1, "resources": {NPU_RESOURCE: 4}},
        "eviction": {"gracePeriodSeconds": grace},
    }


def execute_run(name, ttl=None, grace=0):
    """The seed's guarded run (step 4) turned into an Execute run (step 5)."""
    spec = execute_spec(grace)
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "RepackRun", "metadata": {"name": name}, "spec": spec}


def write_run(tmp_path, run):
    path = tmp_path / f"{run['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(run))
    return str(path)


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def cli(kubeconfig, *args):
    """`kubectl repack` in-process; the click Result."""
    from kubectl_repack.cli import main
    return CliRunner().invoke(main, [*args, "--kubeconfig", kubeconfig], catch_exceptions=False)


def cli_process(kubeconfig, *args, env=None):
    """`kubectl repack` as a separate process (its own pid, so its own Lease identity)."""
    full_env = dict(os.environ, REPACK_NAMESPACE=LEASE_NAMESPACE)
    full_env.update(env or {})
    return subprocess.Popen([sys.executable, "-m", "kubectl_repack.cli", *args, "--kubeconfig", kubeconfig],
                            cwd=REPO_ROOT, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def get_run(api, name):
    return client.CustomObjectsApi(api).get_cluster_custom_object(GROUP, VERSION, PLURAL, name)


def delete_runs(api, names):
    from kubernetes.client.rest import ApiException
    for name in names:
        try:
            client.CustomObjectsApi(api).delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        except ApiException as e:
            if e.status != 404:
                raise


def reason_of(run, ctype):
    for c in (run.get("status") or {}).get("conditions") or ():
        if c["type"] == ctype:
            return c["status"], c["reason"]
    return None


class PodDeletions:
    """Watches a namespace's pods from now on and records every DELETED pod uid (with its name)."""

    def __init__(self, api, ns):
        self.core = client.CoreV1Api(api)
        self.ns = ns
        self.deleted: list = []
        self._stop = threading.Event()
        rv = self.core.list_namespaced_pod(ns).metadata.resource_version
        self._thread = threading.Thread(target=self._run, args=(rv,), daemon=True)
        self._thread.start()

    def _run(self, rv):
        while not self._stop.is_set():
            w = watch.Watch()
            try:
                for ev in w.stream(self.core.list_namespaced_pod, self.ns, resource_version=rv,
                                   timeout_seconds=5):
                    obj = ev["object"]
                    rv = obj.metadata.resource_version
                    if ev["type"] == "DELETED":
                        self.deleted.append((obj.metadata.name, obj.metadata.uid))
                    if self._stop.is_set():
                        break
            except Exception:  # watch expired: resume from the last seen version
                time.sleep(0.2)

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=10)


class EvictionTrap:
    """A plain-HTTP proxy in front of the API server that SIGKILLs the client process as soon as its
    first Eviction call has been carried out, before the answer reaches it: the process dies right
    after the API server evicted the pod and before it could persist the outcome, as a kill -9 or
    an OOM at the worst moment would. Nothing in the plugin knows about it (DESIGN convention 13).

    `kubeconfig` (written into `directory`) points at the proxy; the proxy itself authenticates to
    the API server with the admin credentials of `upstream_kubeconfig`.
    """

    EVICTION = re.compile(r"^/api/v1/namespaces/[^/]+/pods/[^/]+/eviction(\?.*)?$")

    def __init__(self, upstream_kubeconfig, directory):
        import http.server
        import ssl
        from urllib.parse import urlparse

        cfg = yaml.safe_load(open(upstream_kubeconfig))
        cluster_cfg, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
        url = urlparse(cluster_cfg["server"])
        self.upstream = (url.hostname, url.port)
        self.tls = ssl.create_default_context(cafile=cluster_cfg["certificate-authority"])
        self.tls.load_cert_chain(user["client-certificate"], user["client-key"])
        self.process = None
        self.evicted = []
        trap = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self):
                import http.client
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("host", "connection", "accept-encoding", "content-length")}
                conn = http.client.HTTPSConnection(*trap.upstream, context=trap.tls, timeout=60)
                conn.request(self.command, self.path, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
                if self.command == "POST" and trap.EVICTION.match(self.path) and trap.process is not None:
                    trap.evicted.append((self.path, resp.status))
                    trap.process.kill()     # the answer never reaches the client
                    trap.process = None
                    self.close_connection = True
                    return
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.kubeconfig = os.path.join(str(directory), "trap-kubeconfig")
        with open(self.kubeconfig, "w") as f:
            yaml.safe_dump({"apiVersion": "v1", "kind": "Config",
                            "clusters": [{"name": "trap", "cluster": {
                                "server": f"http://127.0.0.1:{self.server.server_address[1]}"}}],
                            "users": [{"name": "trap", "user": {}}],
                            "contexts": [{"name": "trap", "context": {"cluster": "trap", "user": "trap"}}],
                            "current-context": "trap"}, f)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def lease_namespace(monkeypatch):
    monkeypatch.setenv("REPACK_NAMESPACE", LEASE_NAMESPACE)


def parse_json(text):
    return json.loads(text)
