"""The install and uninstall steps: apply, delete, wait, release (`kubectl repack install` / `uninstall`).

Every call to the API server goes through kubectl_repack.kube (objects by their REST path, the
RepackRun store); the command (kubectl_repack.commands.install) parses the flags and prints. Each
step takes an `echo` for the lines it reports, so the command decides where they go.
"""
from __future__ import annotations

import base64
import time
from typing import Callable, Optional
from urllib.parse import urlparse

from kubectl_repack.api.view import ObjectView
from kubectl_repack.api.control import FINALIZER, LEGACY_SIGNING_SECRET_NAME, SEAL_SECRET_NAME, finalizer_removal
from kubectl_repack.api.gates import has_gate, ungate_patch
from kubectl_repack.api.installed import PART_OF, PART_OF_LABEL, SOURCE_ENDPOINTS, SOURCE_FLAG
from kubectl_repack.api.run import is_finished
from kubectl_repack.errors import RepackError
from kubectl_repack.kube.client import request
from kubectl_repack.errors import Conflict, Invalid, NotFound
from kubectl_repack.kube.objects import (KINDS_BY_NAME, POD_KIND, apply_object, delete_object, get_path, json_patch,
                                         kind_of, object_path, read_object)
from kubectl_repack.kube.preflight.network import read_apiserver_sources
from kubectl_repack.kube.runs import RUN_KIND, RunStore

from . import certs, manifests

FIELD_MANAGER = "kubectl-repack"
Echo = Callable[[str], None]
_DEPLOYMENT = KINDS_BY_NAME["Deployment"]


def describe(obj: dict) -> str:
    """`kind.group/name` as kubectl prints it."""
    group = obj["apiVersion"].rpartition("/")[0]
    return f"{obj['kind'].lower()}{'.' + group if group else ''}/{obj['metadata']['name']}"


def server_side_apply(api, obj: dict, dry_run: bool = False) -> dict:
    """Create or update `obj` with server-side apply (forced: install owns these objects); with
    `dry_run`, the API server only says what it would do (dryRun=All: validated, admitted, not stored)."""
    return apply_object(api, obj, FIELD_MANAGER, dry_run)


def _ref(kind: str, name: str, namespace: Optional[str] = None) -> dict:
    """The object install names, as far as its REST path needs it."""
    meta = {"name": name, **({"namespace": namespace} if namespace is not None else {})}
    return {"apiVersion": KINDS_BY_NAME[kind].api_version, "kind": kind, "metadata": meta}


def _made_by_install(obj: Optional[dict]) -> bool:
    labels = ObjectView(obj).labels
    return labels.get(PART_OF_LABEL) == PART_OF


def existing_certs(api, namespace: str, sans: list[str]):
    """The CertBundle of an existing Secret if still valid and covering `sans`, else None."""
    obj = read_object(api, _ref("Secret", manifests.SECRET_NAME, namespace))
    if obj is None:
        return None
    data = obj.get("data") or {}
    try:
        bundle = certs.CertBundle(ca_cert_pem=base64.b64decode(data[certs.CA_CRT]),
                                  cert_pem=base64.b64decode(data[certs.TLS_CRT]),
                                  key_pem=base64.b64decode(data[certs.TLS_KEY]))
        if certs.needs_rotation(bundle.cert_pem) or not set(sans) <= set(certs.sans_of(bundle.cert_pem)):
            return None
    except (KeyError, ValueError):
        return None
    return bundle


def namespace_state(api, namespace: str) -> str:
    """"absent", "ours" (it carries the install's part-of label: install only labels namespaces it
    creates) or "foreign"."""
    obj = read_object(api, _ref("Namespace", namespace))
    if obj is None:
        return "absent"
    return "ours" if _made_by_install(obj) else "foreign"


def ours(api, namespace: str, absent: bool) -> bool:
    """Whether install manages this namespace: it carries the install's part-of label, or, when
    missing, `absent` (install will create it)."""
    state = namespace_state(api, namespace)
    return absent if state == "absent" else state == "ours"


def extra_sans(webhook_url: Optional[str]) -> list[str]:
    """The URL's host, which the API server verifies the serving certificate against."""
    if not webhook_url:
        return []
    host = urlparse(webhook_url).hostname
    return [host] if host else []


def manifests_for(namespace: str, image: str, bundle, webhook_url: Optional[str],
                  placement: Optional[dict] = None) -> list[dict]:
    """CRD first, then the webhook's objects (no Deployment/Service when served from a URL).
    `placement`: node_selector / tolerations / priority_class for the Deployment's pods."""
    from kubectl_repack.policy_schema import policy_crd
    from kubectl_repack.schema import load_crd

    objs = manifests.render(namespace=namespace, image=image, certs=bundle, url=webhook_url, **(placement or {}))
    if webhook_url:
        objs = [o for o in objs if o["kind"] not in ("Deployment", "Service")]
    return [load_crd(), policy_crd()] + objs


# ---------- the webhook's NetworkPolicy ----------

class PolicyDecision:
    """What install does about the webhook's NetworkPolicy: `cidrs` to admit (none: no policy),
    where they came from (`source`), and the line to print (`said`; `warning` when it is one)."""

    def __init__(self, cidrs=(), source=None, said="", warning=False):
        self.cidrs, self.source, self.said, self.warning = tuple(cidrs), source, said, warning


def _policy() -> dict:
    return _ref("NetworkPolicy", manifests.NAME)


def policy_ref() -> str:
    return describe(_policy())


def decide_network_policy(api, apiserver_cidrs, no_network_policy: bool, webhook_url, dry_run: str) -> PolicyDecision:
    """--apiserver-cidr wins; --no-network-policy and a webhook served outside the cluster (no pod
    of the install to guard) render none; a client dry run reads no cluster; otherwise the
    addresses the API servers advertise, or none and a warning when they cannot be known."""
    open_port = f"the webhook port ({manifests.CONTAINER_PORT}) is reachable from every pod"
    close = ("close it with --apiserver-cidr CIDR (the address your API servers call webhooks from, "
             "repeatable), or say so with --no-network-policy")
    if apiserver_cidrs:
        return PolicyDecision(apiserver_cidrs, SOURCE_FLAG,
                              f"{policy_ref()}: webhook port admits only the API server "
                              f"({', '.join(apiserver_cidrs)}, from --apiserver-cidr)")
    if no_network_policy:
        return PolicyDecision(said=f"no NetworkPolicy (--no-network-policy): {open_port}")
    if webhook_url:
        return PolicyDecision()
    if dry_run == "client":
        return PolicyDecision(said=f"warning: no NetworkPolicy rendered: a client dry run reads no cluster, so the API "
                                   f"server's addresses are not known and {open_port}; add --apiserver-cidr CIDR, or "
                                   "use --dry-run=server (it reads them as install does)", warning=True)
    sources = read_apiserver_sources(lambda path, query: get_path(api, path, query))
    if not sources.known:
        return PolicyDecision(said=f"warning: no NetworkPolicy: the API server's addresses cannot be known "
                                   f"({sources.why}), so {open_port}; {close}", warning=True)
    return PolicyDecision(sources.cidrs, SOURCE_ENDPOINTS,
                          f"{policy_ref()}: webhook port admits only the API server "
                          f"({', '.join(sources.cidrs)}, {sources.why})")


def remove_stale_policy(api, namespace: str, dry_run: bool = False) -> str:
    """Delete the NetworkPolicy an earlier install made (this one renders none); '' when there
    is none, else the line to print. One of the same name that install did not make is left alone."""
    policy = _ref("NetworkPolicy", manifests.NAME, namespace)
    found = read_object(api, policy)
    if found is None:
        return ""
    if not _made_by_install(found):
        return f"{policy_ref()} exists, left as it is (not made by install)"
    if not delete_object(api, policy, dry_run=dry_run):
        return ""
    return (f"{policy_ref()} {'would be deleted (server dry run)' if dry_run else 'deleted'} "
            "(an earlier install's; this one renders none)")


# ---------- applying ----------

def apply_all(api, objs: list, echo: Echo, after: Callable[[dict], None]) -> "Applied":
    """Each object with server-side apply, in order; a Namespace install did not create is left as
    it is. `after(obj)` is called once each object's line is printed. Returns what each apply did
    (created, changed, unchanged, taken over), which says whether this was an upgrade."""
    applied = Applied()
    for obj in objs:
        if obj["kind"] == "Namespace" and not ours(api, obj["metadata"]["name"], absent=True):
            echo(f"{describe(obj)} exists, left as it is (not created by install)")
            continue
        before = read_object(api, obj)
        if before is not None:
            managers = take_over(api, obj, before)
            if managers:
                applied.taken_over.append((describe(obj), managers))
        answer = server_side_apply(api, obj)
        applied.record(describe(obj), obj["kind"], before, answer)
        echo(f"{describe(obj)} serverside-applied")
        after(obj)
    return applied


# ---------- upgrading an earlier install ----------

# How the install set reached a cluster when `kubectl repack install` did not apply it itself:
# `kubectl apply -f` of the rendered manifests (client-side apply), `kubectl create -f`, `kubectl
# replace -f`, `kubectl apply --server-side` (its default manager). Server-side apply removes only
# the fields its own manager applied before and no longer applies, so the fields these managers set
# would stay when a newer version stops setting them (the coordinator container that moved out of
# the webhook's pod, a Service port): install takes them over first, as `kubectl apply
# --server-side` does for objects applied client-side (client-go's csaupgrade). Fields of any other
# manager (a controller's caBundle, a user's label, Helm) are left to their owner.
EARLIER_APPLIERS = frozenset({("kubectl-client-side-apply", "Update"), ("kubectl-create", "Update"),
                              ("kubectl-replace", "Update"), ("kubectl", "Apply")})


def _union(a: dict, b: dict) -> dict:
    """Two FieldsV1 sets (nested dicts keyed by f:/k:/v:/i: path elements) as one."""
    out = dict(a)
    for key, value in b.items():
        mine = out.get(key)
        out[key] = _union(mine, value) if isinstance(mine, dict) and isinstance(value, dict) else \
            (value if mine is None else mine)
    return out


def taken_over(managed_fields: list) -> tuple:
    """(managedFields with the entries of EARLIER_APPLIERS merged into install's own Apply entry, or
    turned into it when there is none; the managers merged) — (None, []) when there is nothing to
    take over. Only entries of the main resource and of the same apiVersion as install's entry merge:
    a field set in another version's paths cannot be compared."""
    def main(m):
        return not m.get("subresource")

    ours = next((m for m in managed_fields if main(m) and m.get("manager") == FIELD_MANAGER
                 and m.get("operation") == "Apply"), None)
    earlier = [m for m in managed_fields if main(m) and (m.get("manager"), m.get("operation")) in EARLIER_APPLIERS]
    if not earlier:
        return None, []
    api_version = (ours or earlier[0]).get("apiVersion")
    movable = [m for m in earlier if m.get("apiVersion") == api_version]
    if not movable:
        return None, []
    fields = dict((ours or {}).get("fieldsV1") or {})
    for entry in movable:
        fields = _union(fields, entry.get("fieldsV1") or {})
    merged = {"manager": FIELD_MANAGER, "operation": "Apply", "apiVersion": api_version,
              "time": (ours or movable[0]).get("time"), "fieldsType": "FieldsV1", "fieldsV1": fields}
    replaced = [ours] if ours is not None else []
    out, placed = [], False
    for entry in managed_fields:
        if any(entry is m for m in movable + replaced):
            if not placed:
                out.append(merged)
                placed = True
            continue
        out.append(entry)
    return out, [m["manager"] for m in movable]


def take_over(api, obj: dict, live: dict) -> list:
    """Make install's manager the owner of the fields an earlier applier of the install set
    (EARLIER_APPLIERS) owns in `live`, the stored form of `obj`, so the apply that follows removes
    those this version no longer sets. Returns
    the managers taken over ([] when none, or when the object changed meanwhile: the apply still
    converges every field it sets)."""
    meta = live.get("metadata") or {}
    fields, managers = taken_over(meta.get("managedFields") or [])
    if fields is None:
        return []
    ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")},
           {"op": "replace", "path": "/metadata/managedFields", "value": fields}]
    try:
        request(api, "PATCH", object_path(obj), ops, content_type="application/json-patch+json")
    except (NotFound, Conflict, Invalid):
        return []
    return managers


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _content(obj: Optional[dict]) -> dict:
    """What an apply can change in an object: everything but its status and the bookkeeping in its
    metadata (versions, times, managedFields, kubectl's last-applied copy), labels and annotations kept."""
    obj = obj or {}
    meta = obj.get("metadata") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != LAST_APPLIED}
    kept = {"labels": meta.get("labels") or {}, "annotations": annotations}
    return {**{k: v for k, v in obj.items() if k not in ("metadata", "status")}, "metadata": kept}


class Applied:
    """What apply_all did to each object: created, changed (its spec, rules, labels... differ after
    the apply), unchanged; and whose fields it took over. An install is an upgrade when an object other
    than the Namespace and the CRD (both may outlive an install: uninstall keeps the CRD, and an
    existing namespace is used as it is) was there before."""

    def __init__(self):
        self.created, self.changed, self.unchanged, self.existed = [], [], [], []
        self.taken_over: list = []   # [(object, [managers])]

    def record(self, ref: str, kind: str, before: Optional[dict], after: Optional[dict]) -> None:
        if before is None:
            self.created.append(ref)
            return
        if kind not in ("Namespace", "CustomResourceDefinition"):
            self.existed.append(ref)
        (self.changed if _content(before) != _content(after) else self.unchanged).append(ref)

    @property
    def upgrade(self) -> bool:
        return bool(self.existed)

    def report(self, namespace: str) -> list[str]:
        """The lines that say what an upgrade changed (none for a first install)."""
        if not self.upgrade:
            return []
        if not (self.changed or self.created or self.taken_over):
            return [f"the install found in namespace {namespace} is current: {len(self.unchanged)} object(s) unchanged"]
        lines = [f"upgraded the install found in namespace {namespace}: {len(self.changed)} object(s) changed, "
                 f"{len(self.created)} created, {len(self.unchanged)} unchanged"]
        if self.changed:
            lines.append(f"changed: {', '.join(self.changed)}")
        if self.created:
            lines.append(f"created: {', '.join(self.created)}")
        if self.taken_over:
            managers = sorted({m for _, ms in self.taken_over for m in ms})
            lines.append(f"taken over from {', '.join(managers)} (an earlier install applied with kubectl), so the "
                         f"fields this version no longer sets were removed: {', '.join(r for r, _ in self.taken_over)}")
        return lines


def server_dry_run(api, objs: list, echo: Echo, after=None) -> list:
    """Each object as a server-side apply with dryRun=All; returns what the API server answered.
    The server does not create a namespace in a dry run, so objects in a namespace that does not
    exist yet cannot be checked: they are listed as they would be created (and returned as rendered).
    `after(obj)` is called once each object's line is printed."""
    answers, new_namespace = [], None
    for obj in objs:
        if obj["kind"] == "Namespace":
            state = namespace_state(api, obj["metadata"]["name"])
            if state == "foreign":
                echo(f"{describe(obj)} exists, left as it is (not created by install)")
                continue
            if state == "absent":
                new_namespace = obj["metadata"]["name"]
        if kind_of(obj).namespaced and obj["metadata"].get("namespace") == new_namespace:
            echo(f"{describe(obj)} would be created in the new namespace {new_namespace} "
                 "(not checked by the server: a server dry run does not create the namespace)")
            answers.append(obj)
        else:
            answers.append(server_side_apply(api, obj, dry_run=True))
            echo(f"{describe(obj)} serverside-applied (server dry run)")
        if after is not None:
            after(obj)
    return answers


def controller_secret_names() -> tuple:
    """Secrets the controller (or an older install) makes in its namespace, besides the TLS pair."""
    from kubectl_repack.api.gates import PLACEMENT_KEY_SECRET_NAME

    return SEAL_SECRET_NAME, PLACEMENT_KEY_SECRET_NAME, LEGACY_SIGNING_SECRET_NAME


def legacy_secret(namespace: str) -> dict:
    return _ref("Secret", LEGACY_SIGNING_SECRET_NAME, namespace)


def remove_legacy_secret(api, namespace: str, echo: Echo) -> None:
    """An older install's creator-stamp key: readable by the old webhook, so it goes."""
    legacy = legacy_secret(namespace)
    if delete_object(api, legacy):
        echo(f"{describe(legacy)} deleted (the creator-stamp key of an older install)")


# ---------- waiting ----------

class InstallNotReady(RepackError):
    """--wait ran out: the message names the pod and container that are not ready, and why."""


def _pod_problems(pod: dict) -> list[str]:
    """Why one of the Deployment's pods is not ready, container by container."""
    view = ObjectView(pod)
    meta, status = view.meta, view.status
    name = meta.get("name", "?")
    problems = []
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") != "True":
            problems.append(f"pod {name} is not scheduled: {cond.get('message') or cond.get('reason') or 'pending'}")
    statuses = {c.get("name"): c for c in status.get("containerStatuses") or []}
    for container in (view.spec.get("containers") or []):
        cname = container.get("name")
        cs = statuses.get(cname)
        if cs is None:
            if status.get("phase") == "Pending" and not problems:
                problems.append(f"container {cname} of pod {name} has not started (pod Pending)")
            continue
        if cs.get("ready"):
            continue
        state = cs.get("state") or {}
        if "waiting" in state:
            w = state["waiting"] or {}
            why = f"waiting: {w.get('reason', '')} {w.get('message', '')}".strip()
        elif "terminated" in state:
            t = state["terminated"] or {}
            why = f"terminated: {t.get('reason', '')} (exit code {t.get('exitCode')})"
        else:
            why = "running, but its readiness probe fails"
        last = (cs.get("lastState") or {}).get("terminated")
        if last:
            why += f"; last exit: {last.get('reason', '')} (exit code {last.get('exitCode')})"
        restarts = cs.get("restartCount") or 0
        problems.append(f"container {cname} of pod {name} is not ready ({why}; {restarts} restarts)")
    return problems


def deployment_ready(dep: dict) -> bool:
    """The rollout is complete: the current generation observed, every replica updated, ready and available."""
    view = ObjectView(dep)
    spec, status, meta = view.spec, view.status, view.meta
    want = spec.get("replicas", 1)
    return (status.get("observedGeneration", 0) >= meta.get("generation", 1)
            and status.get("updatedReplicas", 0) == want and status.get("readyReplicas", 0) == want
            and status.get("availableReplicas", 0) == want and status.get("replicas", 0) == want)


def wait_for_deployment(api, namespace: str, name: str, timeout: float, poll: float = 1.0,
                        clock=time.monotonic, sleep=time.sleep) -> dict:
    """Polls the Deployment until `deployment_ready`; on timeout raises InstallNotReady naming
    every container that is not ready (and why), read from the Deployment's pods."""
    path = _DEPLOYMENT.path(namespace, name)
    deadline = clock() + timeout
    dep: dict = {}
    while True:
        dep = get_path(api, path) or {}
        if dep and deployment_ready(dep):
            return dep
        if clock() >= deadline:
            break
        sleep(poll)
    selector = f"app.kubernetes.io/name={name}"   # each Deployment's pods carry their own name
    pods = request(api, "GET", POD_KIND.path(namespace), query=[("labelSelector", selector)]).get("items") or []
    problems = [p for pod in pods for p in _pod_problems(pod)]
    if not dep:
        problems.insert(0, "the Deployment does not exist")
    elif not pods:
        conds = [f"{c.get('type')}={c.get('status')}: {c.get('message', '')}"
                 for c in ObjectView(dep).status.get("conditions") or []]
        problems.append("it has no pods" + (f" ({'; '.join(conds)})" if conds else ""))
    raise InstallNotReady(f"deployment {namespace}/{name} is not Ready after {timeout:.0f}s: "
                          + ("; ".join(problems) or "its pods are not available yet")
                          + " (the objects stay installed; `kubectl repack uninstall` removes them)")


def wait_all(api, deployments: list, timeout: float, echo: Echo) -> None:
    """Wait for each Deployment (its metadata) in turn, one `timeout` for all of them. The webhook's
    pod waits for the TLS Secret the controller makes: a timeout then says so."""
    started = time.monotonic()
    for dep in deployments:
        left = max(1.0, timeout - (time.monotonic() - started))
        echo(f"waiting up to {left:.0f}s for deployment {dep['namespace']}/{dep['name']} to be Ready ...")
        try:
            wait_for_deployment(api, dep["namespace"], dep["name"], left)
        except InstallNotReady as e:
            if dep["name"] == manifests.NAME and \
                    read_object(api, _ref("Secret", manifests.SECRET_NAME, dep["namespace"])) is None:
                raise InstallNotReady(
                    f"{e}; its pod waits for the Secret {dep['namespace']}/{manifests.SECRET_NAME}, which the "
                    f"controller (deployment {dep['namespace']}/{manifests.CONTROLLER_NAME}) makes when it runs: "
                    f"`kubectl -n {dep['namespace']} logs deploy/{manifests.CONTROLLER_NAME}`") from None
            raise
        echo(f"deployment.apps/{dep['name']} Ready")


# ---------- uninstalling ----------

def uninstall_order(namespace: str, include_crd: bool) -> list:
    """What uninstall deletes, in order: the webhook configuration first, the Secrets after the
    Deployments that use them, the Namespace (and with `include_crd` the CRD) last."""
    # The NetworkPolicy is listed whether or not install made one (--apiserver-cidr): not found is fine.
    objs = manifests_for(namespace, "unused", None, None, {"apiserver_cidrs": ["0.0.0.0/32"]})
    # the TLS pair, the seal and the placement keys are made by the controller; the legacy signing key by older versions
    secrets_ = [_ref("Secret", name, namespace) for name in (manifests.SECRET_NAME, *controller_secret_names())]
    ordered = [o for o in reversed(objs) if o["kind"] != "CustomResourceDefinition"]
    at = ordered.index(next(o for o in ordered if o["kind"] == "Deployment")) + 1
    ordered[at:at] = secrets_
    if include_crd:
        ordered += [o for o in objs if o["kind"] == "CustomResourceDefinition"]
    # Namespace last among ours: the namespaced objects go with it anyway, but explicitly first.
    ordered.sort(key=lambda o: o["kind"] == "Namespace" or o["kind"] == "CustomResourceDefinition")
    return ordered


def uninstall(api, ordered: list, echo: Echo, dry_run: str = "none") -> None:
    """Delete `ordered` (uninstall_order); a Namespace install did not create is kept. Once the
    webhook configuration is gone, pods still gated are released; once the controller is, the
    runs' finalizers.

    `dry_run` as kubectl's: "server" decides as the real uninstall does (it reads the namespace's
    label, the gated pods and the runs) and sends every delete with dryRun=All, patching nothing;
    "client" reads nothing (`api` may be None), so what only the cluster knows (did install create
    the namespace?) is said as the condition the real uninstall applies."""
    suffix = {"none": "", "server": " (server dry run)", "client": " (dry run)"}[dry_run]
    offline = dry_run == "client"
    for obj in ordered:
        if obj["kind"] == "Namespace":
            if offline:
                echo(f"{describe(obj)} deleted only if install created it (label {PART_OF_LABEL}={PART_OF}), "
                     f"else kept{suffix}")
                continue
            if not ours(api, obj["metadata"]["name"], absent=False):
                echo(f"{describe(obj)} kept (not created by install){suffix}")
                continue
        gone = True if offline else delete_object(api, obj, dry_run=dry_run == "server")
        echo(f"{describe(obj)} {'deleted' if gone else 'not found'}{suffix}")
        if obj["kind"] == "MutatingWebhookConfiguration":
            if offline:
                echo(f"pods still carrying the placement gate: gate removed{suffix}")
            for pod in ([] if offline else release_gates(api, dry_run=bool(suffix))):
                echo(f"pod/{pod} placement gate removed{suffix}")
        if obj["kind"] == "Deployment" and obj["metadata"]["name"] == manifests.CONTROLLER_NAME:
            if offline:
                echo(f"repackruns: finalizer {FINALIZER} removed{suffix}")
            for run, finished in ([] if offline else release_finalizers(api, dry_run=bool(suffix))):
                echo(f"repackrun.repack.volcano.sh/{run} finalizer removed{suffix}"
                     + ("" if finished else " (the run is not finished and nothing in the cluster "
                                            "carries it on now: `kubectl repack apply --local --resume`)"))


def release_finalizers(api, dry_run: bool = False) -> list:
    """Remove the controller's finalizer from every RepackRun: with the controller gone nobody would,
    and a delete would hang. Returns [(name, finished)]; with `dry_run`, of the runs that carry it,
    patching none."""
    released = []
    found = get_path(api, RUN_KIND.path())
    if found is None:    # no CRD: no runs
        return released
    runs = RunStore(api)
    for run in found.get("items") or []:
        ops = finalizer_removal(run)
        if ops and (dry_run or runs.patch(run["metadata"]["name"], ops)):   # not if changed or gone meanwhile
            released.append((run["metadata"]["name"], is_finished(run)))
    return released


def release_gates(api, dry_run: bool = False) -> list[str]:
    """Remove the placement gate from every pod still carrying it: with the coordinator gone,
    nobody else would (fail open). Returns `namespace/name` of the pods released (with `dry_run`,
    of the pods carrying it, patching none)."""
    released = []
    for pod in request(api, "GET", POD_KIND.path()).get("items") or []:
        if not has_gate(pod):
            continue
        meta = pod["metadata"]
        # not if gone meanwhile, or released by someone else
        if dry_run or json_patch(api, POD_KIND.path(meta["namespace"], meta["name"]), ungate_patch(pod)):
            released.append(f"{meta['namespace']}/{meta['name']}")
    return released
