"""The RepackPolicy CRD and local validation of policies (POLICY-1, POLICY-2): the CRD is made from the
RepackRun CRD (runTemplate.spec is the run's spec schema), the file in config/crd is that object,
and a bad policy is refused before anything is sent, each error naming its field."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from kubectl_repack import schema
from kubectl_repack.errors import ValidationError
from kubectl_repack.policy_schema import FILE_NAME, crd_text, policy_crd, validate_policy, validate_policy_text
from tests.unit.validation.test_corpus import POLICY_SAMPLES

REPO = Path(__file__).parents[3]
GOOD = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackPolicy", "metadata": {"name": "nightly"},
        "spec": {"trigger": {"cronSchedule": "0 2 * * *"},
                 "runTemplate": {"spec": {"mode": "Execute", "goals": [{"resource": "huawei.com/ascend-1980"}]}}}}


def test_the_crd_file_is_the_generated_one():
    """Regenerate with `python -m kubectl_repack.policy_schema config/crd`."""
    assert (REPO / "config" / "crd" / FILE_NAME).read_text(encoding="utf-8") == crd_text()


def test_run_template_spec_is_the_run_crds_spec_schema_without_its_immutability():
    run_spec = schema.load_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    version = policy_crd()["spec"]["versions"][0]
    template = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["runTemplate"]
    got = copy.deepcopy(template["properties"]["spec"])
    assert got["properties"] == run_spec["properties"] and got["required"] == run_spec["required"]
    rules = [r["rule"] for r in got["x-kubernetes-validations"]]
    assert "self == oldSelf" not in rules
    assert len(rules) == len(run_spec["x-kubernetes-validations"]) - 1
    assert version["subresources"] == {"status": {}}
    assert policy_crd()["spec"]["scope"] == "Cluster"
    assert [c["name"] for c in version["additionalPrinterColumns"]][:4] == ["SUSPEND", "LAST-TRIGGER", "NEXT",
                                                                             "LAST-RESULT"]


def test_good_policy_and_the_samples_pass():
    assert validate_policy(copy.deepcopy(GOOD))["metadata"]["name"] == "nightly"
    assert POLICY_SAMPLES
    for path in POLICY_SAMPLES:
        obj = validate_policy_text(path.read_text(), path.name)
        assert obj["metadata"]["name"] == path.stem


def _with(path, value):
    obj = copy.deepcopy(GOOD)
    *parents, last = path.split(".")
    node = obj
    for p in parents:
        node = node.setdefault(p, {})
    if value is None:
        node.pop(last, None)
    else:
        node[last] = value
    return obj


@pytest.mark.parametrize("path,value,error", [
    # the CRD refuses these too (schema and CEL)
    ("spec.windows", [{"schedule": "0 2 * * *"}], "spec.windows[0].duration: required field is missing"),
    ("spec.trigger.onFragAbovePercent", 101, "spec.trigger.onFragAbovePercent: 101 is greater than the maximum of 100"),
    ("spec.trigger.onFragAbovePercent", -1, "spec.trigger.onFragAbovePercent: -1 is less than the minimum of 0"),
    ("spec.runTemplate.spec", {"mode": "Later"}, "spec.runTemplate.spec.mode: 'Later' is not one of ['DryRun', 'Execute']"),
    ("spec.runTemplate.spec", {"mode": "Execute", "goals": [{"resource": "cpu"}]},
     "spec.runTemplate.spec.goals[0].resource: goals.resource must be a fully-qualified accelerator/extended resource "
     "(e.g. nvidia.com/gpu); core resources like cpu, memory and ephemeral-storage are not supported"),
    ("spec.runTemplate.spec", {"mode": "Execute", "bogus": 1}, "spec.runTemplate.spec.bogus: unknown field"),
    ("spec.trigger", {}, "spec.trigger: trigger must set at least one of cronSchedule, onFragAbovePercent or "
                         "onPendingBlocked"),
    ("spec.trigger", {"onPendingBlocked": {"forSeconds": 60}},
     "spec.trigger.onPendingBlocked.podGroupSelector: required field is missing"),
    ("metadata.name", "n" * 49, "metadata.name: is 49 characters long, more than the maximum of 48"),
    ("metadata.namespace", "default", "metadata.namespace: RepackPolicy is cluster-scoped: remove metadata.namespace"),
    # only local validation (CEL cannot parse cron); on the server the controller reports it
    ("spec.trigger.cronSchedule", "0 2 * *", "spec.trigger.cronSchedule: '0 2 * *' has 4 field(s); a cron schedule "
                                            "has 5 (minute hour day-of-month month day-of-week), e.g. '0 2 * * *', or "
                                            "is one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly"),
    ("spec.timeZone", "Europe/Nowhere", "spec.timeZone: 'Europe/Nowhere' is not a time zone name of the IANA database "
                                        "(e.g. UTC, Europe/Berlin, America/New_York)"),
    # the planner refuses it (the CRD takes it)
    ("spec.runTemplate.spec", {"mode": "Execute", "goals": [{"resource": "a/b"}], "scope": {"podGroups": {
        "include": {"selector": {"matchExpressions": [{"key": "k", "operator": "In"}]}}}}},
     "spec.runTemplate.spec.scope.podGroups.include.selector.matchExpressions[0].values: must be specified when "
     "operator is In"),
])
def test_bad_policy_is_refused_naming_the_field(path, value, error):
    with pytest.raises(ValidationError) as e:
        validate_policy(_with(path, value))
    assert error in e.value.errors, e.value.errors


def test_policy_text_must_be_one_object():
    with pytest.raises(ValidationError, match="expected exactly one RepackPolicy"):
        validate_policy_text(yaml.safe_dump_all([GOOD, GOOD]), "two.yaml")
