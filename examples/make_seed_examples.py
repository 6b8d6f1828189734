"""Writes the seed's example clusters as snapshot files (what `kubectl repack snapshot` would write).

    python examples/make_seed_examples.py        # rewrites examples/seed-3-nodes.yaml, seed-20-nodes.yaml

The objects look like what the API server returns for a Volcano cluster: Nodes with capacity,
allocatable, conditions, addresses and nodeInfo; pods with uid, ownerReferences, the
scheduling.k8s.io/group-name / volcano.sh/* annotations, status conditions; PodGroups owned by
their VCJob or ModelServing and carrying the workload's labels; DaemonSet pods on every node.
Everything is derived from names (uids included), so the files are byte-stable.
"""
import os
import sys
import uuid

import yaml

R = "huawei.com/ascend-1980"
HERE = os.path.dirname(os.path.abspath(__file__))
CREATED = "2026-07-29T08:00:00Z"
STARTED = "2026-07-29T08:00:05Z"
NS = "repack-demo"


def uid(*parts):
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "repack-example/" + "/".join(parts)))


def namespace(name):
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "uid": uid("ns", name), "creationTimestamp": CREATED,
                         "labels": {"kubernetes.io/metadata.name": name}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}


def npu_node(name, index, cards=8, labels=None):
    cap = {"cpu": "192", "memory": "1583286348Ki", "pods": "110", "ephemeral-storage": "3748905932Ki",
           "hugepages-1Gi": "0", "hugepages-2Mi": "0", R: str(cards)}
    alloc = dict(cap, cpu="190", memory="1562314828Ki", **{"ephemeral-storage": "3454932262Ki"})
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name, "uid": uid("node", name), "creationTimestamp": CREATED,
            "labels": {"accelerator-pool": "ascend-npu", "beta.kubernetes.io/arch": "arm64",
                       "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64",
                       "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                       "node.kubernetes.io/instance-type": "atlas-800t-a2",
                       "topology.kubernetes.io/zone": f"cn-south-1{'abc'[index % 3]}", **(labels or {})},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        },
        "spec": {"podCIDR": f"10.244.{index}.0/24", "podCIDRs": [f"10.244.{index}.0/24"]},
        "status": {
            "capacity": cap, "allocatable": alloc,
            "conditions": [
                {"type": t, "status": "False", "reason": r, "message": m,
                 "lastHeartbeatTime": STARTED, "lastTransitionTime": CREATED}
                for t, r, m in (("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                                ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                                ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"))
            ] + [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                  "message": "kubelet is posting ready status", "lastHeartbeatTime": STARTED,
                  "lastTransitionTime": CREATED}],
            "addresses": [{"type": "InternalIP", "address": f"192.168.10.{10 + index}"},
                          {"type": "Hostname", "address": name}],
            "nodeInfo": {"architecture": "arm64", "containerRuntimeVersion": "containerd://1.7.22",
                         "kernelVersion": "5.10.0-182.0.0.95.oe2203sp3.aarch64", "kubeProxyVersion": "",
                         "kubeletVersion": "v1.34.1", "operatingSystem": "linux",
                         "osImage": "openEuler 22.03 (LTS-SP3)", "machineID": uid("machine", name).replace("-", ""),
                         "systemUUID": uid("system", name), "bootID": uid("boot", name)},
        },
    }


def _container(name, image, cards=0, cpu="8", memory="64Gi", command=None):
    req = {"cpu": cpu, "memory": memory}
    if cards:
        req[R] = str(cards)
    c = {"name": name, "image": image, "imagePullPolicy": "IfNotPresent",
         "resources": {"requests": req, "limits": dict(req)},
         "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}
    if command:
        c["command"] = command
    return c


def _pod(name, ns, node, node_ip, pod_ip, containers, owner, labels=None, annotations=None,
         scheduler="volcano", node_selector=None, tolerations=None, restart="Never", priority_class=None):
    meta = {"name": name, "namespace": ns, "uid": uid("pod", ns, name), "creationTimestamp": CREATED,
            "labels": dict(labels or {}), "annotations": dict(annotations or {}),
            "ownerReferences": [dict(owner, blockOwnerDeletion=True, controller=True)]}
    spec = {"containers": containers, "dnsPolicy": "ClusterFirst", "enableServiceLinks": True,
            "nodeName": node, "preemptionPolicy": "PreemptLowerPriority", "priority": 0,
            "restartPolicy": restart, "schedulerName": scheduler, "securityContext": {},
            "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
            "tolerations": (tolerations or []) + [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if priority_class:
        spec["priorityClassName"] = priority_class
        spec["priority"] = 2000001000 if priority_class.startswith("system-") else 1000
    status = {
        "phase": "Running", "hostIP": node_ip, "hostIPs": [{"ip": node_ip}], "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}], "qosClass": "Guaranteed", "startTime": STARTED,
        "conditions": [{"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": STARTED}
                       for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                                 "PodScheduled")],
        "containerStatuses": [{"name": c["name"], "image": c["image"], "imageID": "", "ready": True,
                               "restartCount": 0, "started": True, "containerID": "containerd://" +
                               uid("ctr", ns, name, c["name"]).replace("-", ""),
                               "state": {"running": {"startedAt": STARTED}}} for c in containers],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


class Cluster:
    """Builds one example cluster: nodes, workloads and the pods placed on named nodes."""

    def __init__(self):
        self.objects = []
        self.node_ip = {}
        self.pod_seq = {}

    def add_nodes(self, names, **kw):
        for i, name in enumerate(names, start=1):
            node = npu_node(name, i, **kw)
            self.node_ip[name] = node["status"]["addresses"][0]["address"]
            self.objects.append(node)

    def _ip(self, node):
        idx = int(self.node_ip[node].rsplit(".", 1)[1]) - 10
        self.pod_seq[node] = self.pod_seq.get(node, 1) + 1
        return f"10.244.{idx}.{self.pod_seq[node]}"

    def daemonsets(self):
        """kube-proxy and the Ascend device plugin on every node: no cards, never moved."""
        for ds, image, cpu, mem in (("kube-proxy", "registry.k8s.io/kube-proxy:v1.34.1", "100m", "128Mi"),
                                    ("ascend-device-plugin", "ascendhub.huawei.com/public-ascendhub/ascend-k8sdeviceplugin:v6.0.0",
                                     "500m", "512Mi")):
            owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds, "uid": uid("ds", ds)}
            for node in sorted(self.node_ip):
                name = f"{ds}-{uid('dspod', ds, node)[:5]}"
                self.objects.append(_pod(
                    name, "kube-system", node, self.node_ip[node], self.node_ip[node],
                    [_container(ds, image, cpu=cpu, memory=mem)], owner, labels={"k8s-app": ds},
                    scheduler="default-scheduler", restart="Always", priority_class="system-node-critical"))

    def vcjob(self, name, labels, tasks, policies=None, min_available=None, ns=NS, job_uid=None, topology=None):
        """tasks: [(task name, cards per pod, [node of each replica])]; `topology`: the job's
        networkTopology (copied onto its PodGroup, as Volcano's job controller does)."""
        job_uid = job_uid or uid("vcjob", ns, name)
        pg = f"{name}-{job_uid}"
        owner = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": name, "uid": job_uid}
        spec_tasks = []
        total = 0
        for task, cards, nodes in tasks:
            total += len(nodes)
            template = {"metadata": {"labels": {"app": name}}, "spec": {
                "schedulerName": "volcano", "restartPolicy": "Never",
                "nodeSelector": {"accelerator-pool": "ascend-npu"},
                "containers": [_container("trainer", "alpine:3.20", cards, command=["sh", "-c", "tail -f /dev/null"])]}}
            spec_tasks.append({"name": task, "replicas": len(nodes), "minAvailable": len(nodes), "template": template})
            for i, node in enumerate(nodes):
                pod_name = f"{name}-{task}-{i}"
                self.objects.append(_pod(
                    pod_name, ns, node, self.node_ip[node], self._ip(node),
                    [_container("trainer", "alpine:3.20", cards, command=["sh", "-c", "tail -f /dev/null"])],
                    owner, labels={"app": name, "volcano.sh/job-name": name, "volcano.sh/job-namespace": ns,
                                   "volcano.sh/queue-name": "default", "volcano.sh/task-spec": task,
                                   "volcano.sh/job-retry-count": "0"},
                    annotations={"scheduling.k8s.io/group-name": pg, "volcano.sh/job-name": name,
                                 "volcano.sh/job-version": "0", "volcano.sh/queue-name": "default",
                                 "volcano.sh/task-spec": task, "volcano.sh/task-index": str(i),
                                 "volcano.sh/template-uid": f"{name}-{task}"},
                    node_selector={"accelerator-pool": "ascend-npu"}))
        min_available = total if min_available is None else min_available
        job_spec = {"schedulerName": "volcano", "queue": "default", "minAvailable": min_available,
                    "maxRetry": 3, "tasks": spec_tasks}
        if policies:
            job_spec["policies"] = policies
        if topology:
            job_spec["networkTopology"] = dict(topology)
        self.objects.append({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                             "metadata": {"name": name, "namespace": ns, "uid": job_uid, "creationTimestamp": CREATED,
                                          "labels": dict(labels)},
                             "spec": job_spec,
                             "status": {"state": {"phase": "Running", "lastTransitionTime": STARTED},
                                        "minAvailable": min_available, "running": total, "version": 0}})
        self.podgroup(pg, ns, labels, min_available, owner, total, topology)

    def hypernode(self, name, tier, tier_name, nodes=(), children=()):
        members = [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in nodes]
        members += [{"type": "HyperNode", "selector": {"exactMatch": {"name": c}}} for c in children]
        self.objects.append({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                             "metadata": {"name": name, "uid": uid("hypernode", name), "creationTimestamp": CREATED},
                             "spec": {"tier": tier, "tierName": tier_name, "members": members},
                             "status": {"nodeCount": len(nodes)}})

    def podgroup(self, name, ns, labels, min_member, owner, running, topology=None):
        self.objects.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                             "metadata": {"name": name, "namespace": ns, "uid": uid("pg", ns, name),
                                          "creationTimestamp": CREATED, "labels": dict(labels),
                                          "ownerReferences": [dict(owner, blockOwnerDeletion=True, controller=True)]},
                             "spec": {"minMember": min_member, "minResources": {}, "queue": "default",
                                      **({"networkTopology": dict(topology)} if topology else {})},
                             "status": {"phase": "Running", "running": running,
                                        "conditions": [{"type": "Scheduled", "status": "True",
                                                        "reason": "tasks in gang are ready to be scheduled",
                                                        "transitionID": uid("tid", name),
                                                        "lastTransitionTime": STARTED}]}})

    def modelserving(self, name, labels, groups, recovery="ServingGroupRecreate", ns=NS):
        """groups: [(entry cards, worker cards, node)] -- one ServingGroup (and PodGroup) each."""
        ms_uid = uid("ms", ns, name)
        owner = {"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelServing", "name": name,
                 "uid": ms_uid}
        self.objects.append({
            "apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelServing",
            "metadata": {"name": name, "namespace": ns, "uid": ms_uid, "creationTimestamp": CREATED,
                         "labels": dict(labels)},
            "spec": {"schedulerName": "volcano", "replicas": len(groups), "recoveryPolicy": recovery,
                     "template": {"restartGracePeriodSeconds": 30, "gangPolicy": {"minRoleReplicas": {"inference": 1}},
                                  "roles": [{"name": "inference", "replicas": 1, "workerReplicas": 1}]}},
            "status": {"replicas": len(groups), "availableReplicas": len(groups)}})
        for g, (entry, worker, node) in enumerate(groups):
            pg = f"{name}-{g}"
            for role_pod, cards in ((f"{pg}-inference-0", entry), (f"{pg}-inference-0-1", worker)):
                is_entry = role_pod.endswith("inference-0")
                self.objects.append(_pod(
                    role_pod, ns, node, self.node_ip[node], self._ip(node),
                    [_container("leader" if is_entry else "worker", "alpine:3.20", cards,
                                command=["sh", "-c", "tail -f /dev/null"])],
                    owner, labels={"modelserving.volcano.sh/name": name, "modelserving.volcano.sh/group-name": pg,
                                   "modelserving.volcano.sh/role": "inference",
                                   "modelserving.volcano.sh/entry": "true" if is_entry else "false"},
                    annotations={"scheduling.k8s.io/group-name": pg},
                    node_selector={"accelerator-pool": "ascend-npu"}, restart="Always"))
            self.podgroup(pg, ns, labels, 2, owner, 2)

    def deployment_pod(self, name, node, cards, labels, ns=NS):
        """A card pod of a Deployment scheduled by the default scheduler: never moved by repack."""
        rs = f"{name}-6d4cf56db6"
        owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": uid("rs", ns, rs)}
        self.objects.append(_pod(f"{rs}-{uid('rspod', name, node)[:5]}", ns, node, self.node_ip[node],
                                 self._ip(node), [_container("server", "nginx:1.27", cards)], owner,
                                 labels=dict(labels, app=name, **{"pod-template-hash": "6d4cf56db6"}),
                                 scheduler="default-scheduler", restart="Always"))

    def write(self, path, header):
        items = sorted(self.objects, key=_order)
        doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}
        with open(path, "w", encoding="utf-8") as f:
            f.write(header)
            yaml.safe_dump(doc, f, sort_keys=False, default_flow_style=False, width=120)


_KIND_ORDER = ("Namespace", "Node", "HyperNode", "PersistentVolume", "PersistentVolumeClaim", "Pod",
               "PodDisruptionBudget", "PodGroup", "Job", "ModelServing")


def _order(o):
    m = o["metadata"]
    return (_KIND_ORDER.index(o["kind"]), m.get("namespace", ""), m["name"])


ELIGIBLE = {"workload-type": "training", "repack.volcano.sh/eligible": "true", "repack.volcano.sh/protected": "false"}
PROTECTED_TRAIN = {"workload-type": "training", "repack.volcano.sh/protected": "true"}
PROTECTED_INFER = {"workload-type": "inference", "repack.volcano.sh/protected": "true"}


def seed_3_nodes():
    """Steps 2-4 of the seed: the 2-worker batch job sits on ascend-node-01 next to two nodes
    filled (7 of 8 cards) by protected workloads. The guarded DryRun moves the 2 workers, frees
    ascend-node-01, and fragmentation drops from 33 % to 0 %."""
    c = Cluster()
    c.objects += [namespace("kube-system"), namespace(NS)]
    c.add_nodes(["ascend-node-01", "ascend-node-02", "ascend-node-03"])
    c.daemonsets()
    # The uid the seed's sample output shows in the PodGroup name.
    c.vcjob("ascend-batch-training", ELIGIBLE, [("worker", 1, ["ascend-node-01", "ascend-node-01"])],
            job_uid="2f6c840d-8b14-4e45-a4cf-b43c249acbfd")
    c.modelserving("ascend-online-serving-critical", PROTECTED_INFER, [(4, 3, "ascend-node-02")])
    c.vcjob("llm-pretrain-critical", PROTECTED_TRAIN,
            [("master", 3, ["ascend-node-03"]), ("worker", 4, ["ascend-node-03"])])
    c.write(os.path.join(HERE, "seed-3-nodes.yaml"), (
        "# The seed's 3-node situation (steps 2-4), as `kubectl repack snapshot --format yaml` writes it.\n"
        "# ascend-node-01 holds only the 2 x 1-card workers of the eligible VCJob ascend-batch-training;\n"
        "# ascend-node-02/03 are 7/8 full with protected workloads. Expected with guarded-dryrun.yaml:\n"
        "# fragmentation 33% -> 0%, freed ascend-node-01, 2 cards moved, resolvedScope 1 PodGroup / 3 nodes.\n"
        "# Regenerate with: python examples/make_seed_examples.py\n"))


def seed_20_nodes():
    """FRAG-3's example: 20 NPU nodes, 15 occupied, theoretical minimum 12 -> 15 %. Two eligible
    workloads (a VCJob that restarts as a whole on eviction, a ModelServing that re-creates its
    ServingGroup) can be moved: 2 nodes freed -> 5 %, 10 points, with both restart notes."""
    c = Cluster()
    c.objects += [namespace("kube-system"), namespace(NS), namespace("llm")]
    nodes = [f"ascend-node-{i:02d}" for i in range(1, 21)]
    c.add_nodes(nodes)
    c.daemonsets()
    c.vcjob("llm-pretrain-70b", PROTECTED_TRAIN, [("worker", 8, nodes[0:6])], ns="llm")
    c.vcjob("rl-rollout", {"workload-type": "training", "repack.volcano.sh/eligible": "false"},
            [("actor", 8, nodes[6:9])], ns="llm")
    c.modelserving("chat-online", PROTECTED_INFER, [(4, 2, nodes[9]), (4, 2, nodes[10])])
    c.vcjob("ascend-batch-training", ELIGIBLE, [("worker", 1, [nodes[11], nodes[11]])],
            policies=[{"event": "PodEvicted", "action": "RestartJob"}])
    c.modelserving("embedding-serving", {"workload-type": "inference", "repack.volcano.sh/eligible": "true",
                                         "repack.volcano.sh/protected": "false"}, [(1, 1, nodes[12])])
    c.vcjob("eval-nightly", PROTECTED_TRAIN, [("eval", 1, [nodes[13], nodes[13]])])
    c.deployment_pod("legacy-infer", nodes[14], 2, {"workload-type": "inference"})
    c.write(os.path.join(HERE, "seed-20-nodes.yaml"), (
        "# FRAG-3's example from the seed: 20 NPU nodes with 8 cards, 15 occupied, theoretical minimum 12\n"
        "# -> fragmentation 15%. With seed-20-dryrun.yaml the plan frees 2 nodes -> 5% (10 points): it moves\n"
        "# the eligible VCJob ascend-batch-training (PodEvicted -> RestartJob) and the eligible ModelServing\n"
        "# embedding-serving (ServingGroupRecreate), and says that both restart as a whole. ascend-node-14\n"
        "# (protected) and ascend-node-15 (default-scheduler Deployment) show up as blocked under -o wide.\n"
        "# Regenerate with: python examples/make_seed_examples.py\n"))


def topology_8_nodes():
    """The network-topology situation (TOPO-1 to TOPO-4): 8 NPU nodes in two racks (tier-1 HyperNodes rack-a, rack-b under the
    tier-2 spine). Every node has a few cards in use, so no rack has two whole free nodes for a job
    that must run inside one rack. rack-a holds a hard-topology job (highestTierAllowed 1), whose
    pods may only move inside rack-a. With topology-dryrun.yaml (tier 1, blocks of 2, 1 required)
    the plan frees two nodes in one rack."""
    c = Cluster()
    c.objects += [namespace("kube-system"), namespace(NS)]
    nodes = [f"ascend-node-{i:02d}" for i in range(1, 9)]
    c.add_nodes(nodes)
    c.daemonsets()
    c.hypernode("rack-a", 1, "rack", nodes=nodes[:4])
    c.hypernode("rack-b", 1, "rack", nodes=nodes[4:])
    c.hypernode("spine", 2, "spine", children=["rack-a", "rack-b"])
    c.vcjob("allreduce-a", ELIGIBLE, [("worker", 4, [nodes[0], nodes[1]])],
            topology={"mode": "hard", "highestTierAllowed": 1})
    c.vcjob("llm-serve", PROTECTED_TRAIN, [("worker", 3, [nodes[1]])])
    c.vcjob("batch-a", ELIGIBLE, [("worker", 5, [nodes[2]])])
    c.vcjob("batch-b", ELIGIBLE, [("worker", 1, [nodes[3], nodes[4]])])
    c.vcjob("finetune-b", ELIGIBLE, [("worker", 6, [nodes[5]])])
    c.vcjob("eval-b", ELIGIBLE, [("worker", 3, [nodes[6], nodes[7]])])
    c.write(os.path.join(HERE, "topology-8-nodes.yaml"), (
        "# Network topology (TOPO-1 to TOPO-4): 8 NPU nodes in racks rack-a (ascend-node-01..04) and rack-b (05..08),\n"
        "# tier-1 HyperNodes under the tier-2 spine. Every node has cards in use, so no rack has two whole\n"
        "# free nodes. allreduce-a has hard network topology (highestTierAllowed 1): it may only move inside\n"
        "# rack-a. With topology-dryrun.yaml the plan frees a block of 2 nodes inside one rack.\n"
        "# Regenerate with: python examples/make_seed_examples.py\n"))


if __name__ == "__main__":
    seed_3_nodes()
    seed_20_nodes()
    topology_8_nodes()
    sys.exit(0)
