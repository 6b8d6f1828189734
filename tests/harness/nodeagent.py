"""A fake kubelet for many nodes at once, in the spirit of kwok.

The agent owns the Nodes it creates. It
  * creates each Node with the capacity/allocatable, labels and taints asked for, and marks it Ready;
  * keeps them Ready (re-asserts the Ready condition if anything changes it);
  * moves Pending pods bound to its nodes (spec.nodeName set) to Running through pods/status:
    Ready conditions, a fake pod IP, hostIP, startTime, running containerStatuses;
  * finishes graceful deletions: a pod on its nodes with a deletionTimestamp is deleted with
    gracePeriodSeconds=0 after `deletion_delay` seconds (a kubelet would stop the containers first).

It runs as a background thread (`start()`/`stop()`), or as a process:
  python -m tests.harness agent --kubeconfig K [--npu-nodes N --cards C]
"""
from __future__ import annotations

import datetime
import ipaddress
import itertools
import logging
import threading
import time
from dataclasses import dataclass, field

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

log = logging.getLogger("repack.nodeagent")

NPU_RESOURCE = "huawei.com/ascend-1980"
AGENT_LABEL = "repack.test/fake-node"
KUBELET_VERSION = "v1.37.2"
# Taints the control plane puts on nodes that are not Ready; a Ready fake node must not keep them.
CONDITION_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class NodeSpec:
    """What a test asks for. Resource quantities are Kubernetes quantity strings or ints."""

    name: str
    cpu: str = "64"
    memory: str = "512Gi"
    pods: int = 110
    extended: dict[str, int | str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict] = field(default_factory=list)
    unschedulable: bool = False
    ephemeral_storage: str = "1Ti"

    def capacity(self) -> dict[str, str]:
        cap = {"cpu": str(self.cpu), "memory": str(self.memory), "pods": str(self.pods),
               "ephemeral-storage": str(self.ephemeral_storage)}
        cap.update({k: str(v) for k, v in self.extended.items()})
        return cap


def npu_node(name: str, cards: int = 8, resource: str = NPU_RESOURCE,
             pool: str = "ascend-npu", **kw) -> NodeSpec:
    """An accelerator node as the tests use them: `cards` cards, label accelerator-pool=<pool>."""
    labels = {"accelerator-pool": pool, **kw.pop("labels", {})}
    extended = {resource: cards, **kw.pop("extended", {})}
    return NodeSpec(name=name, labels=labels, extended=extended, **kw)


class NodeAgent:
    def __init__(self, api_client, deletion_delay: float = 0.2, heartbeat: float = 10.0,
                 resync: float = 5.0):
        self.api = api_client
        self.core = client.CoreV1Api(api_client)
        self.deletion_delay = deletion_delay
        self.heartbeat = heartbeat
        self.resync = resync
        self.nodes: dict[str, str] = {}  # name -> InternalIP
        self._ip_seq = itertools.count(10)
        self._pod_ips: dict[str, itertools.count] = {}
        self._node_index: dict[str, int] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._deleting: set[str] = set()  # pod uids with a pending final delete
        self.errors: list[str] = []

    # ---- nodes ---------------------------------------------------------------------------
    def add_node(self, spec: NodeSpec) -> client.V1Node:
        with self._lock:
            seq = next(self._ip_seq)
            ip = str(ipaddress.ip_address("10.250.0.0") + seq)
            self._pod_ips[spec.name] = itertools.count(2)
            self.nodes[spec.name] = ip
            self._node_index[spec.name] = seq
        labels = {
            "kubernetes.io/hostname": spec.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "fake",
            AGENT_LABEL: "true",
            **spec.labels,
        }
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": spec.name, "labels": labels,
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"taints": spec.taints or None, "unschedulable": spec.unschedulable or None},
        }
        self.core.create_node(body)
        self._post_node_status(spec, ip)
        return self._clear_condition_taints(spec.name)

    def _clear_condition_taints(self, name: str) -> client.V1Node:
        """The TaintNodesByCondition admission plugin gives every new Node the not-ready taint;
        the node-lifecycle controller (off here: no kubelets) would lift it once the node is
        Ready. The agent does that part of its job for its own nodes."""
        for _ in range(10):
            node = self.core.read_node(name)
            taints = node.spec.taints or []
            keep = [t for t in taints if t.key not in CONDITION_TAINTS]
            if len(keep) == len(taints):
                return node
            patch = [
                {"op": "test", "path": "/metadata/resourceVersion",
                 "value": node.metadata.resource_version},
                {"op": "replace", "path": "/spec/taints",
                 "value": [self.api.sanitize_for_serialization(t) for t in keep]},
            ]
            try:
                return self.core.patch_node(name, patch)
            except ApiException as e:
                if e.status not in (409, 422):
                    raise
        raise RuntimeError(f"could not lift the condition taints of node {name}")

    def add_nodes(self, specs) -> list[str]:
        names = []
        for spec in specs:
            self.add_node(spec)
            names.append(spec.name)
        return names

    def remove_node(self, name: str, delete_pods: bool = False) -> None:
        """Deletes the Node. delete_pods: first force-delete the pods bound to it, so none is
        left behind on a node that no longer exists, and wait (up to 30 s) until they are gone:
        vc-scheduler, told of a pod's deletion after its node's, keeps an entry for that node
        without the Node ("received argument of nil node"), and a later test then saw a pod stay
        unscheduled for its whole timeout."""
        if delete_pods:
            selector = f"spec.nodeName={name}"
            pods = self.core.list_pod_for_all_namespaces(field_selector=selector)
            for pod in pods.items:
                try:
                    self.core.delete_namespaced_pod(
                        pod.metadata.name, pod.metadata.namespace,
                        body=client.V1DeleteOptions(grace_period_seconds=0))
                except ApiException as e:
                    if e.status != 404:
                        raise
            deadline = time.monotonic() + 30
            while pods.items and time.monotonic() < deadline:
                time.sleep(0.2)
                pods = self.core.list_pod_for_all_namespaces(field_selector=selector, limit=1)
        with self._lock:
            self.nodes.pop(name, None)
        try:
            self.core.delete_node(name)
        except ApiException as e:
            if e.status != 404:
                raise

    def _status(self, spec_capacity: dict | None, ip: str) -> dict:
        now = _now()
        conds = [
            {"type": "Ready", "status": "True", "reason": "KubeletReady",
             "message": "fake kubelet (repack node agent) is posting ready status",
             "lastHeartbeatTime": now, "lastTransitionTime": now},
        ]
        for t, reason in (("MemoryPressure", "KubeletHasSufficientMemory"),
                          ("DiskPressure", "KubeletHasNoDiskPressure"),
                          ("PIDPressure", "KubeletHasSufficientPID")):
            conds.append({"type": t, "status": "False", "reason": reason,
                          "lastHeartbeatTime": now, "lastTransitionTime": now})
        status = {"conditions": conds}
        if spec_capacity is not None:
            status.update({
                "capacity": spec_capacity,
                "allocatable": spec_capacity,
                "addresses": [{"type": "InternalIP", "address": ip}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "architecture": "amd64", "operatingSystem": "linux",
                    "kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": KUBELET_VERSION,
                    "containerRuntimeVersion": "fake://repack", "osImage": "fake",
                    "kernelVersion": "fake", "machineID": "", "systemUUID": "", "bootID": "",
                },
                "phase": "Running",
            })
        return status

    def _post_node_status(self, spec: NodeSpec, ip: str) -> None:
        self.core.patch_node_status(spec.name, {"status": self._status(spec.capacity(), ip)})

    def _keep_ready(self) -> None:
        for name, ip in list(self.nodes.items()):
            try:
                node = self.core.read_node_status(name)
            except ApiException as e:
                if e.status == 404:
                    with self._lock:
                        self.nodes.pop(name, None)
                    continue
                raise
            ready = [c for c in (node.status.conditions or []) if c.type == "Ready"]
            stale = True
            if ready and ready[0].status == "True" and ready[0].last_heartbeat_time:
                age = (datetime.datetime.now(datetime.timezone.utc)
                       - ready[0].last_heartbeat_time).total_seconds()
                stale = age > self.heartbeat * 3
            if not ready or ready[0].status != "True" or stale:
                self.core.patch_node_status(name, {"status": self._status(None, ip)})
            if any(t.key in CONDITION_TAINTS for t in node.spec.taints or []):
                self._clear_condition_taints(name)

    # ---- pods ----------------------------------------------------------------------------
    def _handle_pod(self, pod: client.V1Pod) -> None:
        node = pod.spec.node_name
        if not node or node not in self.nodes:
            return
        if pod.metadata.deletion_timestamp is not None:
            self._finish_deletion(pod)
            return
        if pod.status.phase == "Pending":
            self._run_pod(pod)

    def _run_pod(self, pod: client.V1Pod) -> None:
        node = pod.spec.node_name
        with self._lock:
            if node not in self.nodes:
                return
            host_ip = self.nodes[node]
            idx = self._node_index[node]
            n = next(self._pod_ips[node])
        pod_ip = f"10.{200 + idx // 256}.{idx % 256}.{n % 250 + 2}"
        now = _now()
        conds = [{"type": t, "status": "True", "lastTransitionTime": now}
                 for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready",
                           "PodScheduled")]

        def cstatus(c, running: bool):
            st = {"running": {"startedAt": now}} if running else {
                "terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now,
                               "finishedAt": now}}
            return {"name": c.name, "image": c.image or "fake", "imageID": f"fake://{c.image}",
                    "containerID": f"fake://{pod.metadata.uid}/{c.name}", "ready": running,
                    "started": running, "restartCount": 0, "state": st}

        status = {
            "phase": "Running",
            "conditions": conds,
            "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
            "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
            "startTime": now,
            "containerStatuses": [cstatus(c, True) for c in pod.spec.containers],
        }
        if pod.spec.init_containers:
            status["initContainerStatuses"] = [cstatus(c, False) for c in pod.spec.init_containers]
        try:
            self.core.patch_namespaced_pod_status(
                pod.metadata.name, pod.metadata.namespace, {"status": status})
        except ApiException as e:
            if e.status not in (404, 409):
                raise

    def _finish_deletion(self, pod: client.V1Pod) -> None:
        uid = pod.metadata.uid
        with self._lock:
            if uid in self._deleting:
                return
            self._deleting.add(uid)

        def delete() -> None:
            try:
                if self._stop.wait(self.deletion_delay):
                    return
                self.core.delete_namespaced_pod(
                    pod.metadata.name, pod.metadata.namespace,
                    body=client.V1DeleteOptions(grace_period_seconds=0,
                                                preconditions=client.V1Preconditions(uid=uid)))
            except ApiException as e:
                if e.status not in (404, 409):
                    self._record(f"deleting {pod.metadata.namespace}/{pod.metadata.name}: {e}")
            except Exception as e:  # noqa: BLE001
                self._record(f"deleting {pod.metadata.namespace}/{pod.metadata.name}: {e!r}")
            finally:
                with self._lock:
                    self._deleting.discard(uid)

        threading.Thread(target=delete, name=f"delete-{pod.metadata.name}", daemon=True).start()

    def _record(self, msg: str) -> None:
        log.warning(msg)
        self.errors.append(msg)

    # ---- loops ---------------------------------------------------------------------------
    def _resync_pods(self) -> str:
        pods = self.core.list_pod_for_all_namespaces()
        for pod in pods.items:
            self._handle_pod(pod)
        return pods.metadata.resource_version

    def _watch_loop(self) -> None:
        rv = None
        last_resync = 0.0
        while not self._stop.is_set():
            try:
                if rv is None or time.monotonic() - last_resync > self.resync:
                    rv = self._resync_pods()
                    last_resync = time.monotonic()
                w = watch.Watch()
                for ev in w.stream(self.core.list_pod_for_all_namespaces, resource_version=rv,
                                   timeout_seconds=max(1, int(self.resync)),
                                   allow_watch_bookmarks=True):
                    if self._stop.is_set():
                        w.stop()
                        break
                    obj = ev["object"]
                    if ev["type"] == "BOOKMARK":
                        rv = obj.metadata.resource_version if hasattr(obj, "metadata") else \
                            obj["metadata"]["resourceVersion"]
                        continue
                    if ev["type"] == "ERROR":
                        rv = None
                        break
                    rv = obj.metadata.resource_version
                    if ev["type"] in ("ADDED", "MODIFIED"):
                        self._handle_pod(obj)
            except ApiException as e:
                if e.status == 410:
                    rv = None
                    continue
                if self._stop.is_set():
                    break
                self._record(f"pod watch: {e.status} {e.reason}")
                self._stop.wait(0.5)
                rv = None
            except Exception as e:  # noqa: BLE001 - keep the fake kubelet alive
                if self._stop.is_set():
                    break
                self._record(f"pod watch: {e!r}")
                self._stop.wait(0.5)
                rv = None

    def _node_loop(self) -> None:
        while not self._stop.wait(min(self.heartbeat, 2.0)):
            try:
                self._keep_ready()
            except Exception as e:  # noqa: BLE001
                if not self._stop.is_set():
                    self._record(f"node heartbeat: {e!r}")

    def start(self) -> "NodeAgent":
        for target, name in ((self._watch_loop, "pods"), (self._node_loop, "nodes")):
            t = threading.Thread(target=target, name=f"nodeagent-{name}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self, remove_nodes: bool = False) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=self.resync + 2)
        if remove_nodes:
            for name in list(self.nodes):
                try:
                    self.remove_node(name)
                except Exception:  # noqa: BLE001
                    pass

    def run_forever(self) -> None:
        self.start()
        try:
            while not self._stop.wait(1):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()


def main(argv=None) -> int:
    import argparse
    import signal

    from kubernetes import config

    p = argparse.ArgumentParser(prog="python -m tests.harness agent")
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--npu-nodes", type=int, default=0, help="create this many NPU nodes first")
    p.add_argument("--cards", type=int, default=8)
    p.add_argument("--resource", default=NPU_RESOURCE)
    p.add_argument("--prefix", default="npu-")
    p.add_argument("--adopt", action="store_true",
                   help=f"also act for existing nodes labelled {AGENT_LABEL}=true")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    agent = NodeAgent(config.new_client_from_config(config_file=args.kubeconfig))
    if args.adopt:
        for i, node in enumerate(agent.core.list_node(label_selector=f"{AGENT_LABEL}=true").items):
            agent.nodes[node.metadata.name] = next(
                (a.address for a in node.status.addresses or [] if a.type == "InternalIP"),
                f"10.250.1.{i + 1}")
            agent._node_index[node.metadata.name] = 100 + i
            agent._pod_ips[node.metadata.name] = itertools.count(2)
    for i in range(args.npu_nodes):
        agent.add_node(npu_node(f"{args.prefix}{i}", cards=args.cards, resource=args.resource))
    signal.signal(signal.SIGTERM, lambda *_: agent._stop.set())
    agent.run_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
