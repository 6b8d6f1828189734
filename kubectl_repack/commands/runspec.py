"""The RepackRun a command acts on: read from -f (file or stdin) and/or built from quick flags.

Flags given together with -f override the file's fields (documented in `plan --help`):
--mode replaces spec.mode (plan: DryRun, apply: Execute), --resource replaces goals[0].resource, --min-improvement its threshold, --max-podgroups and
--max-cards the budget, each selector flag the matching scope selector (names are kept), --name
the object's name. The result is validated against the CRD schema before anything else happens.
"""
from __future__ import annotations

import copy
import sys
from dataclasses import dataclass
from typing import Optional

from .options import MODE_DRY_RUN
from .selectors import SelectorSyntaxError, parse_selector

# flag name -> (scope axis, include|exclude)
SELECTOR_FLAGS = {
    "podgroup_selector": ("podGroups", "include"),
    "exclude_podgroup_selector": ("podGroups", "exclude"),
    "node_selector": ("nodes", "include"),
    "exclude_node_selector": ("nodes", "exclude"),
}


# Set by the API server on stored objects; a run read back from `-o yaml` must not carry them
# into a new object (the server refuses a create with a resourceVersion).
SERVER_SET_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
                       "deletionGracePeriodSeconds", "managedFields", "selfLink", "finalizers")


@dataclass
class QuickFlags:
    """The flags of `plan` that shape the RepackRun (None = not given)."""
    name: Optional[str] = None
    resource: Optional[str] = None
    min_improvement: Optional[int] = None
    max_podgroups: Optional[int] = None
    max_cards: Optional[str] = None
    podgroup_selector: Optional[str] = None
    exclude_podgroup_selector: Optional[str] = None
    node_selector: Optional[str] = None
    exclude_node_selector: Optional[str] = None
    mode: Optional[str] = None   # --mode of plan (DryRun) and apply (Execute): replaces spec.mode
    targeted: bool = False       # --for: spec.target is set once the snapshot names the PodGroup


def read_run_file(path: str) -> dict:
    """Parse and validate the RepackRun in `path` ('-' = stdin); ValidationError names the problem."""
    # Imported here, as in every function of this module: the commands package is imported for
    # --help and every TAB, and the schema (jsonschema) and the planner are not needed there.
    from kubectl_repack import schema
    from kubectl_repack.errors import DocumentError, UnreadableInput, ValidationError
    from planner import documents

    try:
        if path == "-":
            text, source = read_stdin(), "<stdin>"
        else:
            text, source = documents.read_file(path), path
    except (DocumentError, UnreadableInput) as e:
        raise ValidationError([str(e)]) from e
    return schema.validate_run_text(text, source)


def read_stdin() -> str:
    """Standard input as UTF-8 text (bytes that are not UTF-8 are an error naming the offset)."""
    from planner import documents

    return documents.decode(sys.stdin.buffer.read(), "<stdin>")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def apply_flags(run: Optional[dict], flags: QuickFlags, default_name: str) -> dict:
    """The RepackRun from the file (or a fresh DryRun) with the flags applied on top."""
    from kubectl_repack import schema
    from kubectl_repack.errors import ValidationError

    if run is None:
        if flags.resource is None and not flags.targeted:
            raise ValidationError(["either -f RUN.yaml, --resource NAME or --for KIND/NAME is required "
                                   "(e.g. --resource huawei.com/ascend-1980)"])
        run = {"apiVersion": schema.API_VERSION, "kind": schema.KIND,
               "metadata": {"name": flags.name or default_name}, "spec": {"mode": MODE_DRY_RUN}}
        if flags.resource is not None:
            run["spec"]["goals"] = [{"resource": flags.resource}]
    else:
        run = copy.deepcopy(run)
        run.pop("status", None)  # a printed or stored run evaluated anew: its old status goes
    meta = run.setdefault("metadata", {})
    for field in SERVER_SET_METADATA:
        meta.pop(field, None)
    spec = run.setdefault("spec", {})
    if flags.name is not None:
        meta["name"] = flags.name
    if flags.mode is not None:
        spec["mode"] = flags.mode
    targeted = flags.targeted or "target" in spec   # --for, or a run file naming its target
    if targeted and flags.min_improvement is not None:
        raise ValidationError(["--min-improvement: not with --for (spec.goals[0].minFragImprovementPercent): a "
                               "targeted run succeeds when its target fits, not by how much fragmentation falls"])
    if "goals" not in spec and targeted and flags.resource is None and flags.min_improvement is None:
        goal = {}   # a targeted run may name no goal: the resource is the target's
    else:
        goals = spec.setdefault("goals", [{}])
        if not goals:
            goals.append({})
        goal = goals[0]
    previous_resource = goal.get("resource")
    if flags.resource is not None:
        goal["resource"] = flags.resource
    if flags.min_improvement is not None:
        goal["minFragImprovementPercent"] = flags.min_improvement
    if flags.max_podgroups is not None:
        spec.setdefault("maxPerRun", {})["podGroups"] = flags.max_podgroups
    resources = (spec.get("maxPerRun") or {}).get("resources")
    if flags.resource is not None and resources and previous_resource in resources \
            and previous_resource != flags.resource:
        # The file's card budget was for its resource; carry it over to the overriding one.
        resources[flags.resource] = resources.pop(previous_resource)
    if flags.max_cards is not None:
        if goal.get("resource") is None:
            raise ValidationError(["--max-cards: name the resource it limits with --resource"])
        max_cards = int(flags.max_cards) if str(flags.max_cards).isdigit() else flags.max_cards
        spec.setdefault("maxPerRun", {})["resources"] = {goal.get("resource"): max_cards}
    for attr, (axis, side) in SELECTOR_FLAGS.items():
        text = getattr(flags, attr)
        if text is None:
            continue
        try:
            selector = parse_selector(text)
        except SelectorSyntaxError as e:
            raise ValidationError([f"{_flag(attr)}: {e}"]) from e
        part = spec.setdefault("scope", {}).setdefault(axis, {}).setdefault(side, {})
        part["selector"] = selector
    return run


def build_run(file: Optional[str], flags: QuickFlags, default_name: str) -> dict:
    """Read -f (if any), apply the flags, validate the whole object against the CRD schema."""
    from kubectl_repack import schema
    from kubectl_repack.errors import ValidationError

    if file == "":
        raise ValidationError(["-f/--filename: an empty path; give a RepackRun file, or '-' for stdin"])
    run = read_run_file(file) if file else None
    run = apply_flags(run, flags, default_name)
    return schema.validate_run(run)


TARGET_NOT_SERVED = ("spec.target: the RepackRun CRD installed in this cluster has no spec.target (an older "
                     "kubectl-repack install or the Go implementation's CRD, which would drop it and run an "
                     "untargeted Execute): run kubectl repack install to upgrade it")


def check_spec(run: dict, targeted: bool):
    """planner.RunSpec of the run (SpecError exits 2 before anything is read); with --for, on a
    stand-in target until the snapshot names the PodGroup (`resolve_target`)."""
    import planner

    return planner.RunSpec.from_spec(run["spec"] if not targeted else
                                     dict(run["spec"], target={"podGroups": ["stand-in/for"]}))


def resolve_target(run: dict, snapshot, for_ref: str, namespace: str):
    """--for KIND/NAME (-n NAMESPACE) of plan and apply: spec.target set to the PodGroup the
    snapshot resolves it to (planner.relief.resolve_gang: SpecError naming it when there is no
    such waiting gang), validated again. Returns (run, planner.RunSpec)."""
    import planner
    from kubectl_repack import schema
    from planner import relief

    key = relief.resolve_gang(snapshot, for_ref, namespace)
    run = copy.deepcopy(run)
    run["spec"]["target"] = {"podGroups": [key]}
    run = schema.validate_run(run)
    return run, planner.RunSpec.from_spec(run["spec"])


def require_target_served(api, run: dict) -> None:
    """Before a run with spec.target is created in the cluster: the installed RepackRun CRD must
    declare spec.target, else the API server prunes it and the run executes untargeted
    (ValidationError, exit 2, nothing sent). Read from the CRD (kube.preflight, as doctor's crd
    check); a caller who may not read CRDs gets the same answer from a server-side dry-run create,
    which returns the object as it would be stored."""
    from kubectl_repack.errors import ClusterAPIError, ValidationError
    from kubectl_repack.kube import preflight, runs

    if "target" not in (run.get("spec") or {}):
        return
    try:
        crd = preflight.installed_crd(api)
        # not installed: the create itself fails and says so
        served = crd is None or preflight.serves_field(crd, ("spec", "target"))
    except ClusterAPIError as e:
        if e.status != 403:
            raise
        stored = runs.RunStore(api).create(run, dry_run=True)
        served = "target" in (stored.get("spec") or {})
    if not served:
        raise ValidationError([TARGET_NOT_SERVED])


__all__ = ["QuickFlags", "SELECTOR_FLAGS", "TARGET_NOT_SERVED", "read_run_file", "apply_flags", "build_run",
           "check_spec", "resolve_target", "require_target_served"]
