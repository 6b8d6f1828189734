"""validate_run / validate_spec behaviour beyond the corpus: limits too big for a file, ordering,
paths, returned values, and that the converted schema really closes every object."""
import copy

import pytest

from kubectl_repack import schema
from kubectl_repack.errors import SpecError, ValidationError


def run(**spec):
    spec.setdefault("mode", "DryRun")
    spec.setdefault("goals", [{"resource": "huawei.com/ascend-1980"}])
    return {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun",
            "metadata": {"name": "r"}, "spec": spec}


def errors_of(obj):
    with pytest.raises(ValidationError) as refused:
        schema.validate_run(obj)
    return refused.value.errors


def test_valid_run_is_returned_equal_and_the_input_untouched():
    obj = run(maxPerRun={"podGroups": 2, "resources": {"huawei.com/ascend-1980": 8}})
    before = copy.deepcopy(obj)
    assert schema.validate_run(obj) == before
    assert obj == before


def test_null_fields_are_dropped_like_the_api_server_prunes_them():
    obj = run(scope=None, maxPerRun={"podGroups": None, "resources": None}, eviction=None)
    assert schema.validate_run(obj)["spec"] == {
        "mode": "DryRun", "goals": [{"resource": "huawei.com/ascend-1980"}], "maxPerRun": {}}
    assert obj["spec"]["scope"] is None  # the caller's object is not modified
    assert errors_of(run(mode=None)) == ["spec.mode: required field is missing"]
    # Map values and list items are data, not fields: null there stays an error.
    assert errors_of(run(maxPerRun={"resources": {"huawei.com/ascend-1980": None}})) == [
        "spec.maxPerRun.resources[huawei.com/ascend-1980]: null is not a valid quantity: expected an "
        "integer or a string such as '8', '500m' or '2Gi'"]
    assert errors_of(run(scope={"nodes": {"include": {"names": [None]}}})) == [
        "spec.scope.nodes.include.names[0]: null is not of type 'string'"]


def test_validation_error_is_a_spec_error_with_one_line_per_violation():
    with pytest.raises(SpecError) as refused:
        schema.validate_run(run(mode="Foo", ttlSecondsAfterFinished=-1))
    assert refused.value.errors == [
        "spec.mode: 'Foo' is not one of ['DryRun', 'Execute']",
        "spec.ttlSecondsAfterFinished: -1 is less than the minimum of 0",
    ]


def test_names_are_capped_at_1024():
    names = [f"node-{i}" for i in range(1024)]
    schema.validate_run(run(scope={"nodes": {"exclude": {"names": names}}}))
    assert errors_of(run(scope={"nodes": {"exclude": {"names": names + ["one-more"]}}})) == [
        "spec.scope.nodes.exclude.names: has 1025 items, more than the maximum of 1024"]


def test_relocations_are_capped_at_4096():
    record = {"namespace": "ns", "plannedNodeName": "n1", "eviction": {"phase": "Pending"},
              "placement": {"phase": "WaitingForReplacement"}}
    obj = run()
    obj["status"] = {"relocations": [record] * 4096}
    schema.validate_run(obj)
    obj["status"]["relocations"].append(record)
    assert errors_of(obj) == ["status.relocations: has 4097 items, more than the maximum of 4096"]


def test_errors_are_sorted_by_path_with_numeric_indexes():
    obj = run()
    obj["status"] = {"plan": {"moves": [{"namespace": "ns", "podGroupName": "pg"}] * 11}}
    obj["status"]["plan"]["moves"][10] = {"namespace": "ns", "podGroupName": "pg", "x": 1}
    obj["status"]["plan"]["moves"][2] = {"namespace": "ns", "podGroupName": "pg", "y": 1}
    assert errors_of(obj) == ["status.plan.moves[2].y: unknown field",
                              "status.plan.moves[10].x: unknown field"]


def test_a_list_or_scalar_is_not_a_run():
    assert errors_of([run()]) == ["(root): expected a RepackRun object, got array"]
    assert errors_of("RepackRun") == ["(root): expected a RepackRun object, got string"]


def test_condition_needs_the_metav1_condition_fields():
    obj = run()
    obj["status"] = {"conditions": [{"type": "Complete", "status": "True",
                                     "reason": "RepackRecommended"}]}
    assert errors_of(obj) == [
        "status.conditions[0].lastTransitionTime: required field is missing",
        "status.conditions[0].message: required field is missing",
    ]


def test_generated_name_is_not_enough_and_long_names_are_refused():
    obj = run()
    obj["metadata"] = {"generateName": "r-"}
    assert errors_of(obj) == ["metadata.name: required field is missing"]
    obj["metadata"] = {"name": "a" * 254}
    assert errors_of(obj) == ["metadata.name: must be no more than 253 characters"]


def test_validate_spec_reports_paths_from_spec():
    assert schema.validate_spec({"mode": "Execute", "scope": None}) == {"mode": "Execute"}
    with pytest.raises(ValidationError) as refused:
        schema.validate_spec({"mode": "Execute", "goals": [{"resource": "cpu"}], "x": 1})
    assert refused.value.errors == [
        "spec.goals[0].resource: goals.resource must be a fully-qualified accelerator/extended "
        "resource (e.g. nvidia.com/gpu); core resources like cpu, memory and ephemeral-storage "
        "are not supported",
        "spec.x: unknown field",
    ]


def test_validate_run_text_returns_the_parsed_object():
    text = ("apiVersion: repack.volcano.sh/v1alpha1\nkind: RepackRun\nmetadata: {name: r}\n"
            "spec: {mode: DryRun, goals: [{resource: nvidia.com/gpu}]}\n")
    assert schema.validate_run_text(text, "r.yaml") == run(goals=[{"resource": "nvidia.com/gpu"}])


def test_every_object_with_properties_is_closed_in_the_converted_schema():
    def walk(node, path):
        if isinstance(node, dict):
            if "properties" in node and path and path[0] != "metadata":
                assert node.get("additionalProperties") is False, ".".join(path)
            for key, value in node.get("properties", {}).items():
                walk(value, path + [key])
            for key in ("items", "additionalProperties"):
                if isinstance(node.get(key), dict):
                    walk(node[key], path + [key])
    converted = schema.run_schema()
    walk(converted, [])
    assert converted["properties"]["spec"]["additionalProperties"] is False


def test_schema_accessors_return_copies():
    schema.spec_schema()["properties"]["mode"]["enum"].append("Chaos")
    schema.load_crd()["spec"]["group"] = "changed"
    assert schema.spec_schema()["properties"]["mode"]["enum"] == ["DryRun", "Execute"]
    assert schema.load_crd()["spec"]["group"] == "repack.volcano.sh"


def test_an_unknown_cel_rule_fails_loudly():
    node = {"type": "string", "x-kubernetes-validations": [{"rule": "self.startsWith('x')"}]}
    with pytest.raises(schema.UnsupportedRule):
        schema._convert(node)


def test_int_or_string_without_anyof_is_translated():
    node = schema._convert({"x-kubernetes-int-or-string": True})
    assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}]


def test_whole_floats_in_integer_fields_are_stored_as_integers():
    stored = schema.validate_run(run(goals=[{"resource": "nvidia.com/gpu",
                                             "minFragImprovementPercent": 10.0}],
                                     maxPerRun={"podGroups": 2.0, "resources": {"nvidia.com/gpu": 4.0}},
                                     ttlSecondsAfterFinished=60))
    assert stored["spec"]["goals"][0]["minFragImprovementPercent"] == 10
    assert type(stored["spec"]["goals"][0]["minFragImprovementPercent"]) is int
    assert type(stored["spec"]["maxPerRun"]["podGroups"]) is int
    assert type(stored["spec"]["maxPerRun"]["resources"]["nvidia.com/gpu"]) is int
    assert errors_of(run(maxPerRun={"podGroups": 2.5})) == [
        "spec.maxPerRun.podGroups: 2.5 is not of type 'integer'"]
