"""Small builders for RepackRuns, relocation records, pods and AdmissionReviews (test data only)."""
from __future__ import annotations

import uuid
from typing import Any, Optional

from kubectl_repack.api.control import RECORDS_DIGEST_ANNOTATION, RECORDS_SEAL_ANNOTATION, records_digest, seal

VCJOB_API = "batch.volcano.sh/v1alpha1"
MS_API = "workload.serving.volcano.sh/v1alpha1"


def owner(kind: str, name: str, api_version: Optional[str] = None) -> dict:
    default_api = {"Job": VCJOB_API, "ModelServing": MS_API, "ReplicaSet": "apps/v1",
                   "StatefulSet": "apps/v1", "Deployment": "apps/v1"}
    return {"apiVersion": api_version or default_api.get(kind, "v1"), "kind": kind, "name": name}


def relocation(victim: str, ns: str = "demo", group: str = "pg", planned: str = "node-b",
               eviction: str = "Accepted", placement: str = "WaitingForReplacement",
               replacement: str = "") -> dict:
    rel: dict[str, Any] = {"namespace": ns, "victimPodName": victim, "podGroupName": group,
                           "plannedNodeName": planned, "eviction": {"phase": eviction},
                           "placement": {"phase": placement}}
    if replacement:
        rel["placement"]["replacementPodName"] = replacement
    return rel


def move(ns: str, group: str, own: Optional[dict], pods: list[str], to: str = "node-b") -> dict:
    m: dict[str, Any] = {"namespace": ns, "podGroupName": group, "cards": len(pods),
                         "pods": [{"name": p, "fromNode": "node-a", "toNode": to, "cards": 1} for p in pods]}
    if own:
        m["owner"] = own
    return m


SEAL_KEY = b"k" * 32   # the records-seal key of these tests (the controller's, in a cluster)
PLACEMENT_KEY = b"p" * 32   # the placement key of these tests (the webhook's and the coordinator's marks MAC)


def sealed_annotations(uid: str, records: list) -> dict:
    """What the controller writes in one patch over its records: the seal and the digest."""
    return {RECORDS_SEAL_ANNOTATION: seal(SEAL_KEY, uid, records), RECORDS_DIGEST_ANNOTATION: records_digest(uid, records)}


def run(name: str = "run-1", relocations: list[dict] = (), moves: list[dict] = (), mode: str = "Execute",
        phase: str = "Running", created: str = "2026-07-30T10:00:00Z", uid: Optional[str] = None,
        sealed: bool = True) -> dict:
    """A RepackRun; `sealed`: its records carry the seal and digest the controller would write (SEAL_KEY)."""
    uid = uid or f"uid-{name}"
    meta: dict[str, Any] = {"name": name, "uid": uid, "creationTimestamp": created}
    if sealed:
        meta["annotations"] = sealed_annotations(uid, list(relocations))
    return {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": meta,
            "spec": {"mode": mode, "goals": [{"resource": "huawei.com/ascend-1980"}]},
            "status": {"phase": phase, "plan": {"moves": list(moves)}, "relocations": list(relocations)}}


def reseal(the_run: dict) -> dict:
    """Seal the run's records again after a test changed them (as the controller would)."""
    meta = the_run["metadata"]
    meta.setdefault("annotations", {}).update(sealed_annotations(meta["uid"], the_run["status"]["relocations"]))
    return the_run


def pod(name: str = "", ns: str = "demo", ctrl: Optional[dict] = None, labels: Optional[dict] = None,
        annotations: Optional[dict] = None, scheduler: str = "volcano", generate_name: str = "",
        gates: Optional[list] = None, node: str = "") -> dict:
    meta: dict[str, Any] = {"namespace": ns}
    if name:
        meta["name"] = name
    if generate_name:
        meta["generateName"] = generate_name
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    if ctrl:
        meta["ownerReferences"] = [dict(ctrl, uid="owner-uid", controller=True, blockOwnerDeletion=True)]
    spec: dict[str, Any] = {"schedulerName": scheduler,
                            "containers": [{"name": "c", "image": "alpine:3.20"}]}
    if gates is not None:
        spec["schedulingGates"] = gates
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def vcjob_pod(name: str, job: str, task: str, ns: str = "demo", group: str = "pg", **kw) -> dict:
    return pod(name, ns, ctrl=owner("Job", job),
               annotations={"volcano.sh/job-name": job, "volcano.sh/task-spec": task,
                            "scheduling.k8s.io/group-name": group}, **kw)


def rs_pod(rs: str, hash_: str, ns: str = "demo", **kw) -> dict:
    return pod("", ns, ctrl=owner("ReplicaSet", rs), labels={"pod-template-hash": hash_, "app": "web"},
               generate_name=rs + "-", **kw)


def ms_pod(ms: str, group_index: int, role: str, role_index: int, pod_index: int, ns: str = "demo",
           pg: Optional[str] = None) -> dict:
    group = pg or f"{ms}-{group_index}"
    name = f"{ms}-{group_index}-{role}-{role_index}-{pod_index}"
    labels = {"modelserving.volcano.sh/name": ms, "modelserving.volcano.sh/group-name": group,
              "modelserving.volcano.sh/role": role, "modelserving.volcano.sh/role-id": f"{role}-{role_index}"}
    if pod_index == 0:
        labels["modelserving.volcano.sh/entry"] = "true"
    return pod(name, ns, ctrl=owner("ModelServing", ms), labels=labels,
               annotations={"scheduling.k8s.io/group-name": group})


def review_request(obj: Any, operation: str = "CREATE", resource: str = "pods", ns: str = "demo",
                   uid: Optional[str] = None, dry_run: bool = False, sub_resource: str = "") -> dict:
    req: dict[str, Any] = {
        "uid": uid or str(uuid.uuid4()),
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": resource},
        "namespace": ns, "operation": operation, "object": obj, "dryRun": dry_run,
        "userInfo": {"username": "system:serviceaccount:volcano-system:volcano-controllers"},
    }
    if sub_resource:
        req["subResource"] = sub_resource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}
