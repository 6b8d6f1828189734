"""The RepackPolicy CRD, made from the RepackRun CRD, and local validation of policies (POLICY-1, POLICY-2).

`spec.runTemplate.spec` is a RepackRun spec: its schema is the RepackRun CRD's own `spec` schema
(config/crd/repack.volcano.sh_repackruns.yaml, the one source), copied in by `policy_crd()`
without the run's transition rule (`self == oldSelf`: a run's spec is immutable, a template is
not), as the Go design's embedded RepackRunSpec does. config/crd/repack.volcano.sh_repackpolicies.yaml
is generated from it (`python -m kubectl_repack.policy_schema config/crd`; a unit test fails on
drift), `kubectl repack install` and the Helm chart apply the same object.

Local validation (`validate_policy`) runs the CRD's schema through the converter the runs use
(kubectl_repack.schema: unknown fields refused, CEL rules through their jsonschema equivalents,
errors `<path>: <message>` naming the field), then what CEL cannot say (kubectl_repack.api.policy.
parse_policy: the cron strings, the time zone, durations, the name's length), then the planner's
view of the template (a spec the CRD takes but the planner refuses), so a bad policy is refused
before anything is sent.
"""
from __future__ import annotations

import copy
import functools
import sys

from kubectl_repack import schema as run_schema_module
from kubectl_repack.api.policy import (CRD_NAME, DEFAULT_HISTORY_LIMIT, KIND, NAME_MAX, PLURAL, SINGULAR, PolicyError,
                                       parse_policy, template_field)
from kubectl_repack.api.run import API_VERSION, GROUP, VERSION
from kubectl_repack.errors import ValidationError

FILE_NAME = f"{GROUP}_{PLURAL}.yaml"
# Go's time.ParseDuration syntax (what kubectl_repack.api.times parses), e.g. 2h, 90m, 1h30m.
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"
# the policy's CEL rules; their local equivalents are in kubectl_repack.schema.CEL_EQUIVALENTS
TRIGGER_RULE = run_schema_module.POLICY_TRIGGER_RULE
NAME_RULE = run_schema_module.POLICY_NAME_RULE
HEADER = """\
# RepackPolicy: creates RepackRuns from a template on a cron schedule, above a fragmentation
# threshold, or for a gang blocked by fragmentation (POLICY-1, POLICY-2). GENERATED from the RepackRun CRD by
# `python -m kubectl_repack.policy_schema config/crd` (runTemplate.spec is the RepackRun spec schema);
# do not edit by hand. Field names follow the Go design's RepackPolicy; timeZone, windows,
# minWorkloadInterval and onPendingBlocked are ours (a Go CRD would prune them).
"""

def _duration(description: str) -> dict:
    return {"type": "string", "description": description, "pattern": DURATION_PATTERN, "maxLength": 64}


def _cron(description: str) -> dict:
    return {"type": "string", "description": description, "minLength": 1, "maxLength": 256}


def policy_crd() -> dict:
    """The RepackPolicy CustomResourceDefinition (a fresh dict)."""
    run_crd = run_schema_module.load_crd()
    run_version = next(v for v in run_crd["spec"]["versions"] if v["name"] == VERSION)
    run_spec = copy.deepcopy(run_version["schema"]["openAPIV3Schema"]["properties"]["spec"])
    run_spec["x-kubernetes-validations"] = [r for r in run_spec.get("x-kubernetes-validations", ())
                                            if " ".join(r["rule"].split()) not in run_schema_module.SERVER_ONLY_RULES]
    run_spec["description"] = "A RepackRun spec (the RepackRun CRD's schema): what every run of the policy does."
    selector = copy.deepcopy(run_spec["properties"]["scope"]["properties"]["podGroups"]["properties"]["include"]
                             ["properties"]["selector"])
    selector["description"] = "Labels of the PodGroups whose waiting starts runs (required; {} matches every PodGroup)."
    string_map = {"type": "object", "additionalProperties": {"type": "string"}}
    spec = {
        "type": "object",
        "description": "When runs start, from which template, and how many are kept.",
        "required": ["trigger", "runTemplate"],
        "properties": {
            "trigger": {
                "type": "object",
                "description": "When a run starts; any trigger set fires on its own.",
                "x-kubernetes-validations": [{
                    "rule": TRIGGER_RULE,
                    "message": "trigger must set at least one of cronSchedule, onFragAbovePercent or onPendingBlocked"}],
                "properties": {
                    "cronSchedule": _cron("5-field cron schedule (minute hour day-of-month month day-of-week) or a "
                                          "macro such as @hourly, in spec.timeZone. A malformed one is reported by "
                                          "the controller (Healthy=False, ReconcileFailed)."),
                    "onFragAbovePercent": {
                        "type": "integer", "format": "int32", "minimum": 0, "maximum": 100,
                        "description": "Start a run when the fragmentation of goals[0].resource (the whole cluster) "
                                       "is above this percent (strictly)."},
                    "onPendingBlocked": {
                        "type": "object",
                        "description": "Start a run targeted at a pending gang blocked by fragmentation (not by its "
                                       "queue or selectors) for forSeconds. Not in the Go API.",
                        "required": ["podGroupSelector"],
                        "properties": {
                            "forSeconds": {"type": "integer", "format": "int32", "minimum": 0, "default": 60,
                                           "description": "How long a gang must have been blocked; also the wait "
                                                          "before retrying a gang after TargetCannotFit."},
                            "podGroupSelector": selector,
                        },
                    },
                },
            },
            "timeZone": {"type": "string", "maxLength": 64,
                         "description": "IANA time zone of cronSchedule and windows (like CronJob's); UTC when unset."},
            "runTemplate": {
                "type": "object",
                "description": "The RepackRun every trigger creates.",
                "required": ["spec"],
                "properties": {
                    "metadata": {"type": "object", "description": "Labels and annotations of the runs.",
                                 "properties": {"labels": copy.deepcopy(string_map),
                                                "annotations": copy.deepcopy(string_map)}},
                    "spec": run_spec,
                },
            },
            "suspend": {"type": "boolean", "default": False,
                        "description": "Create no runs (runs already created go on)."},
            "successfulRunsHistoryLimit": {"type": "integer", "format": "int32", "minimum": 0,
                                           "default": DEFAULT_HISTORY_LIMIT,
                                           "description": "Succeeded runs kept; older ones are deleted."},
            "failedRunsHistoryLimit": {"type": "integer", "format": "int32", "minimum": 0,
                                       "default": DEFAULT_HISTORY_LIMIT,
                                       "description": "Failed runs kept; older ones are deleted."},
            "windows": {
                "type": "array", "maxItems": 16,
                "description": "Maintenance windows: a window is open while some fire time t of its schedule has "
                               "t <= now < t + duration. Outside every window no run is created, and an Execute "
                               "created inside one must end its evictions by the window's end. Not in the Go API, "
                               "whose CRD would prune it (there an Execute can start at any time).",
                "items": {"type": "object", "required": ["schedule", "duration"], "properties": {
                    "schedule": _cron("5-field cron schedule of the window's openings, in spec.timeZone."),
                    "duration": _duration("How long the window stays open, e.g. 2h."),
                }},
            },
            "minWorkloadInterval": _duration(
                "A workload (by owner) that any Execute moved within this interval is out of scope for this "
                "policy's runs, e.g. 24h."),
        },
    }
    status = {
        "type": "object",
        "description": "What the controller did and why (the Go design's fields, plus nextTriggerTime, "
                       "lastEvaluation, recentlyMoved and pendingBlocked).",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "inProgress": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            "lastTriggerTime": {"type": "string", "format": "date-time"},
            "lastScheduleTime": {"type": "string", "format": "date-time"},
            "lastSuccessfulTime": {"type": "string", "format": "date-time"},
            "lastEvaluationTime": {"type": "string", "format": "date-time"},
            "nextTriggerTime": {"type": "string", "format": "date-time"},
            "lastRunStatus": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "lastEvaluation": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "recentlyMoved": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            "pendingBlocked": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            "conditions": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            "observedGeneration": {"type": "integer", "format": "int64"},
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": GROUP,
            "names": {"kind": KIND, "listKind": f"{KIND}List", "plural": PLURAL, "singular": SINGULAR,
                      "shortNames": ["rpp", SINGULAR]},
            "scope": "Cluster",
            "versions": [{
                "name": VERSION, "served": True, "storage": True, "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "SUSPEND", "type": "boolean", "jsonPath": ".spec.suspend"},
                    {"name": "LAST-TRIGGER", "type": "date", "jsonPath": ".status.lastTriggerTime"},
                    {"name": "NEXT", "type": "string", "jsonPath": ".status.nextTriggerTime",
                     "description": "When the cron schedule fires next (UTC)"},
                    {"name": "LAST-RESULT", "type": "string", "jsonPath": ".status.lastRunStatus.reason",
                     "description": "How the newest finished run ended"},
                    {"name": "HEALTHY", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Healthy\")].status"},
                    {"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "RepackPolicy creates RepackRuns from a template when a trigger fires (cluster-scoped).",
                    "required": ["spec"],
                    "x-kubernetes-validations": [{
                        "rule": NAME_RULE,
                        "message": f"metadata.name may have at most {NAME_MAX} characters: runs are named "
                                   "<policy>-<YYYYMMDDHHmmss> and labelled with it"}],
                    "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                   "metadata": {"type": "object"}, "spec": spec, "status": status},
                }},
            }],
        },
    }


def crd_text() -> str:
    import yaml

    return HEADER + yaml.safe_dump(policy_crd(), sort_keys=False, width=100, allow_unicode=True)


@functools.lru_cache(maxsize=1)
def _converted():
    return run_schema_module._convert(policy_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


def validate_policy(obj) -> dict:
    """Validate one RepackPolicy; return it as the API server would store it, or raise
    ValidationError with one `<path>: <message>` per error (schema, then the controller's own
    checks, then the planner's view of the template)."""
    schema = _converted()
    if not isinstance(obj, dict):
        raise ValidationError([f"{run_schema_module.ROOT}: expected a {KIND} object, "
                               f"got {run_schema_module._json_type(obj)}"])
    obj = run_schema_module._as_stored(obj, schema)
    found = (run_schema_module._schema_errors_of(schema, obj)
             | run_schema_module._metadata_errors(obj, kind=KIND, api_version=API_VERSION))
    if found:
        raise ValidationError(run_schema_module._render(found, schema))
    try:
        parse_policy(obj)
    except PolicyError as e:
        raise ValidationError([str(e)]) from None
    problem = template_problem(obj["spec"]["runTemplate"]["spec"])
    if problem:
        raise ValidationError([problem])
    return obj


def template_problem(spec) -> str:
    """Why the planner refuses this template spec ('' when it takes it), naming the policy's field."""
    import planner
    from kubectl_repack.errors import SpecError

    try:
        planner.RunSpec.from_spec(dict(spec))
    except SpecError as e:
        return template_field(str(e))
    return ""


def validate_policy_text(text: str, source_name: str = "<stdin>") -> dict:
    """Parse YAML or JSON holding exactly one RepackPolicy and validate it."""
    documents = run_schema_module._parse_documents(text, source_name)
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise ValidationError([f"{source_name}: expected exactly one {KIND} object"])
    return validate_policy(documents[0])


def main(argv=None) -> int:
    """`python -m kubectl_repack.policy_schema DIR`: write DIR/repack.volcano.sh_repackpolicies.yaml."""
    import os

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m kubectl_repack.policy_schema DIR", file=sys.stderr)
        return 2
    path = os.path.join(args[0], FILE_NAME)
    with open(path, "w", encoding="utf-8") as f:
        f.write(crd_text())
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
