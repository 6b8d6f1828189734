"""Migratability (MIG-1..3): may this pod, which requests R, be evicted and re-created elsewhere?

Each rule is a small named unit returning None (no objection) or a Blocked verdict with a reason
code (`verdicts.VerdictReason`), so a plan can say why a node cannot be vacated.

A rule reads the context `ctx`: `snapshot`, `scope` and, where the caller gave one, `not_evictable`
({namespace: why}: namespaces whose pods the run may not evict, planner.plan's input of that name).
"""
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from .model import opt_out
from .topology import has_network_topology
from .verdicts import VerdictReason


@dataclass(frozen=True)
class Blocked:
    """Why a pod cannot move: a stable reason code and a sentence naming the pod."""
    reason: VerdictReason
    message: str


@dataclass(frozen=True)
class RuleContext:
    """What the rules read, for a caller without a prepared pass (prepare.Prepared is one too)."""
    snapshot: object
    scope: object
    not_evictable: Mapping = field(default_factory=lambda: MappingProxyType({}))


def mirror_pod(pod, ctx):
    if pod.mirror:
        return Blocked(VerdictReason.MIRROR_POD, f"pod {pod.key} is a static (mirror) pod")


def terminating(pod, ctx):
    if pod.terminating:
        return Blocked(VerdictReason.POD_TERMINATING, f"pod {pod.key} is already terminating")


def not_volcano(pod, ctx):
    if pod.scheduler_name != "volcano":
        return Blocked(VerdictReason.NOT_SCHEDULED_BY_VOLCANO,
                       f"pod {pod.key} is scheduled by {pod.scheduler_name!r}, not volcano")


def daemonset_pod(pod, ctx):
    if pod.owner is not None and pod.owner.kind == "DaemonSet":
        return Blocked(VerdictReason.DAEMONSET_POD,
                       f"pod {pod.key} belongs to DaemonSet {pod.owner.name} and would return to this node")


def bare_pod(pod, ctx):
    if pod.owner is None or not pod.owner.controller:
        return Blocked(VerdictReason.NO_CONTROLLER, f"pod {pod.key} has no controller that would re-create it")


def no_podgroup(pod, ctx):
    g = pod.group_name
    if not g:
        return Blocked(VerdictReason.NO_PODGROUP, f"pod {pod.key} is not linked to a PodGroup")
    if f"{pod.namespace}/{g}" not in ctx.snapshot.podgroup_by_key:
        return Blocked(VerdictReason.NO_PODGROUP,
                       f"pod {pod.key} names PodGroup {pod.namespace}/{g}, which does not exist")


def out_of_scope(pod, ctx):
    pg = ctx.snapshot.podgroup_by_key.get(f"{pod.namespace}/{pod.group_name}")
    if pg is not None and not ctx.scope.podgroup_in_scope(pg):
        return Blocked(VerdictReason.PODGROUP_OUT_OF_SCOPE,
                       f"PodGroup {pg.key} of pod {pod.key} is not in scope.podGroups")


def do_not_disrupt(pod, ctx):
    """A workload's opt-out (model.DO_NOT_DISRUPT_ANNOTATIONS) on the pod, its PodGroup, its workload
    or any other member pins the whole PodGroup; the pinned pods stay and keep their nodes occupied."""
    found = opt_out(pod.annotations)
    key = f"{pod.namespace}/{pod.group_name}"
    if found:
        return Blocked(VerdictReason.DO_NOT_DISRUPT, f"do-not-disrupt: pod {pod.key} is annotated {found}"
                       + (f"; its PodGroup {key} is not moved" if pod.group_name else ""))
    pinned = ctx.snapshot.do_not_disrupt.get(key) if pod.group_name else None
    if pinned is not None:
        source, found = pinned
        return Blocked(VerdictReason.DO_NOT_DISRUPT, f"do-not-disrupt: {source} is annotated {found}; "
                                                     f"PodGroup {key} of pod {pod.key} is not moved")


def not_evictable(pod, ctx):
    """A namespace the caller says the run may not evict in (planner.plan's `not_evictable`, e.g. its
    creator lacks `create pods/eviction` there): its pods stay, and so their whole PodGroups (a
    PodGroup's pods share its namespace). Contexts without that input (tests, benchmarks) have none."""
    why = (getattr(ctx, "not_evictable", None) or {}).get(pod.namespace)
    if why:
        return Blocked(VerdictReason.EVICTION_NOT_AUTHORIZED, f"pod {pod.key}: {why}")


def local_volume(pod, ctx):
    for claim in pod.pvc_names:
        pvc = ctx.snapshot.pvc_by_key.get(f"{pod.namespace}/{claim}")
        pv = ctx.snapshot.pv_by_name.get(pvc.volume_name) if pvc else None
        if pv is not None and pv.local:
            return Blocked(VerdictReason.LOCAL_VOLUME, f"pod {pod.key} uses local volume {pv.name} (claim {claim})")


def topology_unavailable(pod, ctx):
    """A cycle or a second parent in the HyperNode tree makes vc-scheduler place no gang with network
    topology (hard or soft, PodGroup or SubGroup level): an evicted pod of one would stay Pending."""
    problems = ctx.snapshot.topology.problems
    if not problems or not pod.group_name:
        return None
    pg = ctx.snapshot.podgroup_by_key.get(f"{pod.namespace}/{pod.group_name}")
    if has_network_topology(pg, ctx.snapshot):
        return Blocked(VerdictReason.TOPOLOGY_UNAVAILABLE,
                       f"pod {pod.key}: PodGroup {pg.key} has network topology, and vc-scheduler places no such "
                       f"gang while the HyperNode tree is broken ({'; '.join(problems)})")


# Intrinsic objections first: a pod the run may not evict is named so only when nothing else pins it.
RULES = (mirror_pod, terminating, not_volcano, daemonset_pod, bare_pod, no_podgroup, out_of_scope, do_not_disrupt,
         local_volume, topology_unavailable, not_evictable)


def check_movable(pod, ctx):
    """First objection of any rule, or None when the pod may be moved."""
    for rule in RULES:
        verdict = rule(pod, ctx)
        if verdict is not None:
            return verdict
    return None
