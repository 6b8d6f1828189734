"""The verdicts on the objects read (pure): the install's CRD, webhook, endpoints, Leases and
admission policies, the caller's access, the Kubernetes version, Volcano."""
from __future__ import annotations

import datetime as dt
import re
from typing import Any, Mapping, Optional, Sequence

from kubectl_repack.api.control import ADMISSION_POLICY_NAMES
from kubectl_repack.api.installed import WEBHOOK_CONFIG, WEBHOOK_NAME
from kubectl_repack.api.lease import LeaseRecord
from kubectl_repack.api.run import GROUP, VERSION, as_map
from kubectl_repack.api.times import parse_time
from kubectl_repack.api.versions import SUPPORTED_KUBERNETES, TESTED_KUBERNETES, TESTED_VOLCANO, minor_of

from .checks import Access, CRD_NAME, Check, FAIL, INSTALL, OK, SERVICE, WARN, age

VOLCANO_CRDS = ("podgroups.scheduling.volcano.sh", "queues.scheduling.volcano.sh")
VOLCANO_NAMESPACE = "volcano-system"
SCHEDULER_LEASE_PATTERN = re.compile(r"(vc|volcano)-scheduler")
SCHEDULER_RECENT = dt.timedelta(hours=24)


def _difference(a: Any, b: Any, path: str = "") -> str:
    """The path of the first difference between two JSON values ('' when equal)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{path}.{key}"
            sub = _difference(a[key], b[key], f"{path}.{key}")
            if sub:
                return sub
        return ""
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path} (length {len(a)} vs {len(b)})"
        for i, (x, y) in enumerate(zip(a, b)):
            sub = _difference(x, y, f"{path}[{i}]")
            if sub:
                return sub
        return ""
    return "" if a == b else (path or ".")


def _served(crd: Mapping) -> Optional[Mapping]:
    for v in as_map(crd.get("spec")).get("versions") or ():
        if as_map(v).get("name") == VERSION:
            return as_map(v)
    return None


def serves_field(crd: Mapping, path: Sequence[str]) -> bool:
    """Whether the served version's openAPIV3Schema of `crd` declares the field at `path` (e.g.
    ("spec", "target")): an undeclared field of a structural schema is pruned on every write."""
    node = as_map(as_map(_served(crd)).get("schema")).get("openAPIV3Schema")
    for name in path:
        node = as_map(as_map(node).get("properties")).get(name)
        if node is None:
            return False
    return True


def _columns(version: Mapping) -> list:
    # The API server drops zero values (priority 0) on its way back; compare without them.
    return [{k: v for k, v in as_map(c).items() if v not in (0, "", None)}
            for c in version.get("additionalPrinterColumns") or ()]


def crd_verdict(found: Optional[Mapping], bundled: Mapping) -> Check:
    """The cluster's RepackRun CRD against the bundled one: served version, schema, printer columns."""
    name = "crd"
    if found is None:
        return Check(name, FAIL, f"CustomResourceDefinition {CRD_NAME} not found", INSTALL)
    conds = {as_map(c).get("type"): as_map(c).get("status") for c in as_map(found.get("status")).get("conditions") or ()}
    if conds.get("Established") != "True":
        return Check(name, FAIL, f"CustomResourceDefinition {CRD_NAME} is not Established",
                     f"kubectl describe crd {CRD_NAME}")
    ours, theirs = _served(bundled), _served(found)
    if theirs is None or not theirs.get("served"):
        return Check(name, FAIL, f"CustomResourceDefinition {CRD_NAME} does not serve {GROUP}/{VERSION}", INSTALL)
    where = _difference(as_map(theirs.get("schema")).get("openAPIV3Schema"),
                        as_map(as_map(ours).get("schema")).get("openAPIV3Schema"))
    if where:
        return Check(name, FAIL, f"{CRD_NAME} {VERSION}: the schema differs from this plugin's at "
                                 f"openAPIV3Schema{where} (an older or newer release installed it)", INSTALL)
    where = _difference(_columns(theirs), _columns(as_map(ours)))
    if where:
        return Check(name, FAIL, f"{CRD_NAME} {VERSION}: the printer columns differ from this plugin's at "
                                 f"additionalPrinterColumns{where}", INSTALL)
    return Check(name, OK, f"{CRD_NAME} {VERSION} Established, schema and printer columns current")


def our_webhook(config: Mapping) -> Mapping:
    hooks = [as_map(h) for h in config.get("webhooks") or ()]
    return next((h for h in hooks if h.get("name") == WEBHOOK_NAME), hooks[0] if hooks else {})


def webhook_verdict(config: Optional[Mapping]) -> Check:
    name = "webhook"
    if config is None:
        return Check(name, FAIL, f"MutatingWebhookConfiguration {WEBHOOK_CONFIG} not found: replacement pods "
                                 "will not be steered to their planned nodes", INSTALL)
    hook = our_webhook(config)
    if not hook:
        return Check(name, FAIL, f"MutatingWebhookConfiguration {WEBHOOK_CONFIG} has no webhooks", INSTALL)
    cc = as_map(hook.get("clientConfig"))
    svc = as_map(cc.get("service"))
    target = (f"Service {svc.get('namespace')}/{svc.get('name')}" if svc else f"URL {cc.get('url')}")
    return Check(name, OK, f"MutatingWebhookConfiguration {WEBHOOK_CONFIG} calls {target} "
                           f"(failurePolicy {hook.get('failurePolicy') or 'Fail'})")


def webhook_service(config: Optional[Mapping], namespace: str) -> Optional[tuple]:
    """(namespace, name) of the Service the webhook calls; install's default when there is no
    configuration; None when it calls a URL."""
    if config is None:
        return namespace, SERVICE
    cc = as_map(our_webhook(config).get("clientConfig"))
    svc = as_map(cc.get("service"))
    if not svc:
        return None
    return str(svc.get("namespace") or namespace), str(svc.get("name") or SERVICE)


def ready_endpoints(slices: Sequence[Mapping], endpoints: Optional[Mapping]) -> tuple:
    """(ready, not ready) addresses: EndpointSlices when there are any (`ready` unset counts as
    ready, as discovery.k8s.io/v1 says), else the Endpoints object's subsets."""
    if slices:
        ready = not_ready = 0
        for s in slices:
            for ep in as_map(s).get("endpoints") or ():
                n = len(as_map(ep).get("addresses") or ())
                if as_map(as_map(ep).get("conditions")).get("ready") is False:
                    not_ready += n
                else:
                    ready += n
        return ready, not_ready
    subsets = as_map(endpoints).get("subsets") or ()
    return (sum(len(as_map(s).get("addresses") or ()) for s in subsets),
            sum(len(as_map(s).get("notReadyAddresses") or ()) for s in subsets))


def endpoints_verdict(ref: str, service: Optional[Mapping], ready: int, not_ready: int) -> Check:
    name = "webhook-endpoints"
    ns, _, svc = ref.partition("/")
    if service is None:
        return Check(name, FAIL, f"Service {ref} not found", INSTALL)
    if ready == 0:
        return Check(name, FAIL, f"Service {ref} has no ready endpoints ({not_ready} not ready): the webhook "
                                 "is not serving, pods are created without placement",
                     f"kubectl -n {ns} get pods -l app.kubernetes.io/name={svc}; kubectl -n {ns} logs "
                     f"deployment/{svc} -c webhook")
    return Check(name, OK, f"Service {ref}: {ready} ready endpoint(s)" + (f", {not_ready} not ready" if not_ready else ""))


def lease_verdict(name: str, ref: str, lease: Optional[Mapping], now: dt.datetime, what: str) -> Check:
    """A Lease held and fresh (renewTime + leaseDurationSeconds after `now`, on this clock)."""
    record = LeaseRecord.from_dict(lease)
    down = f"the {what} is not running"
    if record is None:
        return Check(name, FAIL, f"Lease {ref} not found: {down}", INSTALL)
    if not record.holder:
        return Check(name, FAIL, f"Lease {ref} is not held: {down}", INSTALL)
    expires = record.expires()
    renewed = f"renewed {age((now - record.renew_time).total_seconds())} ago" if record.renew_time else "never renewed"
    if expires is None or now >= expires:
        return Check(name, FAIL, f"Lease {ref} held by {record.holder} but expired ({renewed}): {down}",
                     f"{INSTALL}; kubectl -n {ref.partition('/')[0]} get pods")
    return Check(name, OK, f"Lease {ref} held by {record.holder}, {renewed}")


def access_verdict(access: Access, review: Mapping) -> Check:
    st = as_map(review.get("status"))
    what = f"{access.verb} {access.resource}.{access.group}"
    for_ = f" (needed by {access.why})" if access.why else ""
    if st.get("allowed"):
        return Check(access.check_name, OK, f"may {what}")
    why = st.get("reason") or st.get("evaluationError") or "no RBAC rule allows it"
    return Check(access.check_name, FAIL, f"may not {what}{for_}: {why}",
                 f"ask a cluster admin for a ClusterRole with verb {access.verb} on {access.resource} "
                 f"in API group {access.group}")


MIN_KUBERNETES = SUPPORTED_KUBERNETES
ADMISSION_POLICIES = ADMISSION_POLICY_NAMES


def kubernetes_verdict(version: Optional[Mapping]) -> Check:
    """`version`: the API server's /version. FAIL below what the install needs; WARN on a minor CI
    does not test (it names the tested version); OK on the tested minor."""
    v = as_map(version)
    got = minor_of(v.get("gitVersion"))
    if got is None:
        return Check("kubernetes", None, f"the API server reports no version ({v.get('gitVersion')!r})")
    need = ".".join(map(str, MIN_KUBERNETES))
    if got < MIN_KUBERNETES:
        return Check("kubernetes", FAIL, f"Kubernetes {v['gitVersion']}: kubectl-repack needs >= {need} "
                                          "(ValidatingAdmissionPolicy vouches for who created a run)",
                     f"upgrade the cluster to Kubernetes {need} or later")
    if got != minor_of(TESTED_KUBERNETES):
        return Check("kubernetes", None, f"Kubernetes {v['gitVersion']} (>= {need}) is not tested: CI tests "
                                         f"Kubernetes {TESTED_KUBERNETES} only")
    return Check("kubernetes", OK, f"Kubernetes {v['gitVersion']} (>= {need}; CI tests {TESTED_KUBERNETES})")


VOLCANO_SCHEDULER_IMAGE = re.compile(r"(?:^|/)vc-scheduler(?::([^@]+))?(?:@.*)?$")


def volcano_version_verdict(deployments: Sequence[Mapping]) -> Check:
    """`deployments`: those of Volcano's namespace. The version is the tag of the vc-scheduler
    image (Volcano's installer and chart deploy it so); WARN when none is found or it is a Volcano
    minor CI does not test (naming the tested version)."""
    name = "volcano-version"
    tags = []
    for deployment in deployments:
        meta = as_map(deployment.get("metadata"))
        pod_spec = as_map(as_map(as_map(deployment.get("spec")).get("template")).get("spec"))
        for container in pod_spec.get("containers") or []:
            found = VOLCANO_SCHEDULER_IMAGE.search(str(as_map(container).get("image") or ""))
            if found:
                tags.append((found.group(1) or "", f"{meta.get('namespace') or VOLCANO_NAMESPACE}/{meta.get('name')}"))
    if not tags:
        return Check(name, None, f"no Deployment in {VOLCANO_NAMESPACE} runs a vc-scheduler image: Volcano's "
                                 f"version unknown (CI tests Volcano {TESTED_VOLCANO})")
    tag, where = sorted(tags)[0]
    if minor_of(tag) is None:
        return Check(name, None, f"Deployment {where} runs vc-scheduler {tag or '(untagged)'}: Volcano's version "
                                 f"unknown (CI tests Volcano {TESTED_VOLCANO})")
    if minor_of(tag) != minor_of(TESTED_VOLCANO):
        return Check(name, None, f"Volcano {tag} (Deployment {where}) is not tested: CI tests Volcano "
                                 f"{TESTED_VOLCANO} only")
    return Check(name, OK, f"Volcano {tag} (Deployment {where}; CI tests {TESTED_VOLCANO})")


def policies_verdict(policies: Mapping, bindings: Mapping) -> Check:
    """`policies`/`bindings`: name -> object or None, for each of ADMISSION_POLICIES."""
    missing = [n for n in ADMISSION_POLICIES if policies.get(n) is None or bindings.get(n) is None]
    if missing:
        return Check("admission-policies", FAIL, f"ValidatingAdmissionPolicy (or binding) missing: {', '.join(missing)}; "
                                                 "the controller evicts nothing without them", INSTALL)
    weak = [n for n in ADMISSION_POLICIES if as_map(as_map(policies[n]).get("spec")).get("failurePolicy", "Fail") != "Fail"
            or "Deny" not in (as_map(as_map(bindings[n]).get("spec")).get("validationActions") or [])]
    if weak:
        return Check("admission-policies", FAIL, f"not enforced (failurePolicy Fail, binding action Deny): "
                                                 f"{', '.join(weak)}", INSTALL)
    return Check("admission-policies", OK, f"{', '.join(ADMISSION_POLICIES)} bound with Deny")


def volcano_crds_verdict(found: Mapping) -> Check:
    """`found`: CRD name -> object or None."""
    missing = [n for n, crd in found.items() if crd is None]
    if missing:
        return Check("volcano-crds", FAIL, f"Volcano is not installed: CustomResourceDefinition "
                                           f"{', '.join(missing)} not found",
                     "install Volcano: https://volcano.sh/en/docs/installation/")
    return Check("volcano-crds", OK, f"{', '.join(found)} installed")


def _scheduler_marks(pg: Mapping) -> list:
    """(time, what) of every trace a scheduler left on a PodGroup: its conditions' transitions, and
    status writes by a scheduler in managedFields (vc-scheduler moves a PodGroup to Inqueue without
    any condition)."""
    marks = []
    for c in as_map(pg.get("status")).get("conditions") or ():
        t = parse_time(as_map(c).get("lastTransitionTime"))
        if t is not None:
            marks.append((t, f"condition {as_map(c).get('type')}"))
    for m in as_map(pg.get("metadata")).get("managedFields") or ():
        m = as_map(m)
        manager = str(m.get("manager") or "")
        if "sched" not in manager or not (m.get("subresource") == "status" or "f:status" in as_map(m.get("fieldsV1"))):
            continue
        t = parse_time(m.get("time"))
        if t is not None:
            marks.append((t, f"status written by {manager}"))
    return marks


def scheduler_verdict(leases: Sequence[Mapping], podgroups: Sequence[Mapping], now: dt.datetime) -> Check:
    """A scheduler seen acting: a fresh scheduler Lease in volcano-system, else the newest trace it
    left on a PodGroup (a condition transition, a status write) within SCHEDULER_RECENT."""
    name = "volcano-scheduler"
    stale = ""
    for lease in leases:
        meta = as_map(lease.get("metadata"))
        if not SCHEDULER_LEASE_PATTERN.search(str(meta.get("name") or "")):
            continue
        record = LeaseRecord.from_dict(lease)
        ref = f"{meta.get('namespace') or VOLCANO_NAMESPACE}/{meta.get('name')}"
        if record is not None and record.is_fresh(now):
            return Check(name, OK, f"Lease {ref} held by {record.holder}, renewed "
                                   f"{age((now - record.renew_time).total_seconds())} ago")
        stale = f"Lease {ref} is not held or expired; "
    newest, where = None, ""
    for pg in podgroups:
        meta = as_map(pg.get("metadata"))
        ref = f"PodGroup {meta.get('namespace')}/{meta.get('name')}"
        for when, what in _scheduler_marks(pg):
            if newest is None or when > newest:
                newest, where = when, f"{ref} {what}"
    fix = f"kubectl -n {VOLCANO_NAMESPACE} get pods; kubectl -n {VOLCANO_NAMESPACE} logs deployment/volcano-scheduler"
    if newest is None:
        return Check(name, WARN, f"{stale}no PodGroup status written by a scheduler: no sign of a Volcano "
                                 "scheduler acting (fine on a cluster with no gang yet)", fix)
    ago = age((now - newest).total_seconds())
    if now - newest > SCHEDULER_RECENT:
        return Check(name, WARN, f"{stale}the newest scheduler trace on a PodGroup is {ago} old ({where}): no "
                                 "sign of a Volcano scheduler acting in the last 24h", fix)
    return Check(name, OK, f"last seen {ago} ago: {where}")


