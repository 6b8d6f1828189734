"""Fixtures for tests that run against the real local control plane (tests/harness).

The control plane starts once per session. It needs the binaries that
`hack/build-control-plane.sh` builds; hack/test.sh exports REPACK_BIN_DIR/REPACK_CRD_DIR before
pytest. Without them every e2e test FAILS with a message saying so: they are never skipped.
When an e2e test fails, the report lists every component's log file and the run dir is kept.
"""
from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass

import pytest

from tests.harness import ControlPlane, ControlPlaneError, NodeAgent
from tests.harness.realnode import NodeError, NodeNetwork, RealNode

_STATE: dict = {}


@dataclass
class Cluster:
    """What the `control_plane` fixture gives a test."""

    cp: ControlPlane
    kubeconfig: str
    api_client: object  # kubernetes.client.ApiClient (admin)

    def kubectl(self, *args, **kw):
        return self.cp.kubectl(*args, **kw)


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.e2e)


def _wants_real_node(session) -> bool:
    return any("real_node" in getattr(item, "fixturenames", ()) for item in session.items)


@pytest.fixture(scope="session")
def control_plane(request):
    """The session's control plane. When a collected test uses `real_node`, the API server
    listens on the node network's bridge address (where pods reach it) instead of 127.0.0.1;
    that needs root. Otherwise nothing changes for the other tests."""
    if "error" in _STATE:
        pytest.fail(_STATE["error"], pytrace=False)
    t0 = time.monotonic()
    network = None
    if _wants_real_node(request.session):
        if os.geteuid() == 0:
            network = NodeNetwork()
        else:  # the other tests still run; the ones asking for the node fail saying why
            _STATE["node_error"] = ("the real node needs root (network interfaces, iptables, containerd, "
                                    "kubelet); run the e2e tests as root, as CI does")
    try:
        cp = ControlPlane(node_network=network)
        _STATE["cp"] = cp
        cp.start()
    except (ControlPlaneError, NodeError) as e:
        _STATE["error"] = f"the local control plane did not start: {e}"
        pytest.fail(_STATE["error"], pytrace=False)
    elapsed = time.monotonic() - t0
    print(f"\ncontrol plane up in {elapsed:.1f}s: {cp.timings}\n{cp.describe_logs()}")
    _STATE["startup_seconds"] = elapsed
    try:
        yield Cluster(cp=cp, kubeconfig=cp.kubeconfig, api_client=cp.api_client())
    finally:
        agent = _STATE.pop("agent", None)
        if agent is not None:
            agent.stop()
        cp.stop()


@pytest.fixture(scope="module")
def real_node(control_plane):
    """A real kubelet node (containerd, runc, CNI bridge, kube-proxy, kube-scheduler) with the
    images from hack/build-image.sh imported, for the tests of one module; stopped after it."""
    if "node_error" in _STATE:
        pytest.fail(_STATE["node_error"], pytrace=False)
    cp = control_plane.cp
    t0 = time.monotonic()
    try:
        node = RealNode(cp, cp.node_network)
        cp.nodes.append(node)
        _STATE["node"] = node
        node.start()
    except NodeError as e:
        _STATE["node_error"] = f"the real node did not start: {e}"
        pytest.fail(_STATE["node_error"], pytrace=False)
    elapsed = time.monotonic() - t0
    print(f"\nreal node {node.name} up in {elapsed:.1f}s: {node.describe()}")
    _STATE.setdefault("node_seconds", []).append(elapsed)
    try:
        yield node
    finally:
        t1 = time.monotonic()
        node.stop()
        cp.nodes.remove(node)
        _STATE.pop("node", None)
        _STATE.setdefault("node_stop_seconds", []).append(time.monotonic() - t1)


@pytest.fixture(scope="session")
def node_agent(control_plane):
    """The fake kubelet. Tests add nodes with `node_agent.add_node(npu_node(...))` or the
    `fake_nodes` fixture, which also removes them afterwards."""
    agent = NodeAgent(control_plane.cp.new_api_client()).start()
    _STATE["agent"] = agent
    yield agent
    agent.stop()
    _STATE.pop("agent", None)


@pytest.fixture
def fake_nodes(node_agent):
    """Adds NodeSpecs for this test; when it ends, deletes the pods still on them (at once) and
    then the Nodes."""
    added: list[str] = []

    def add(*specs):
        for spec in specs:
            node_agent.add_node(spec)
            added.append(spec.name)
        return [s.name for s in specs]

    yield add
    for name in added:
        node_agent.remove_node(name, delete_pods=True)


@pytest.fixture
def make_namespace(control_plane):
    """make_namespace(prefix='e2e') -> name of a new namespace whose default ServiceAccount exists.
    Namespaces are deleted when the test ends, and their pods waited for (up to a minute)."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    core = client.CoreV1Api(control_plane.api_client)
    made: list[str] = []

    def make(prefix: str = "e2e", labels: dict | None = None) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        core.create_namespace({"metadata": {"name": name, "labels": labels or {}}})
        made.append(name)
        deadline = time.monotonic() + 30
        while True:  # pods are refused until the serviceaccount controller made `default`
            try:
                core.read_namespaced_service_account("default", name)
                return name
            except ApiException as e:
                if e.status != 404 or time.monotonic() > deadline:
                    raise
            time.sleep(0.1)

    yield make
    for name in made:
        try:
            core.delete_namespace(name)
            # A Terminating namespace admits no new pods, so what its controllers would re-create
            # cannot come back; deleting the pods now saves waiting for the namespace controller.
            core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
        except ApiException:
            pass
    # Wait (bounded) until their pods are gone, so the next test sees a cluster without them:
    # the planner's statistics are cluster-wide. (The Namespace objects go a few seconds later.)
    deadline = time.monotonic() + 60
    for name in made:
        while time.monotonic() < deadline and core.list_namespaced_pod(name, limit=1).items:
            time.sleep(0.25)


@pytest.fixture(autouse=True)
def _control_plane_alive():
    """Fails a test at once, with the component's last log lines, if a component has died
    (instead of letting it time out waiting for something that can no longer happen)."""
    cp = _STATE.get("cp")
    if cp is not None and cp.components and "error" not in _STATE:
        cp.check_alive()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and "e2e" in item.keywords:
        cp = _STATE.get("cp")
        if cp is not None and cp.components:
            cp.mark_failed()  # keep the logs after the session
            report.sections.append(("control plane logs", cp.describe_logs()))
            node = _STATE.get("node")
            if node is not None:
                report.sections.append(("real node logs", "\n".join(
                    f"  {c.name}: {c.log_path}" for c in node.components.values())))
            agent = _STATE.get("agent")
            if agent is not None and agent.errors:
                report.sections.append(("node agent errors", "\n".join(agent.errors[-20:])))


def pytest_terminal_summary(terminalreporter):
    cp = _STATE.get("cp")
    if cp is not None and cp.keep and cp.components:
        terminalreporter.write_line(f"control-plane logs kept in {cp.log_dir}")
    if "startup_seconds" in _STATE:
        terminalreporter.write_line(
            f"e2e control plane started in {_STATE['startup_seconds']:.1f}s")
    for started, stopped in zip(_STATE.get("node_seconds", []), _STATE.get("node_stop_seconds", [])):
        terminalreporter.write_line(f"real node started in {started:.1f}s, stopped in {stopped:.1f}s")
