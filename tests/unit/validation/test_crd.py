"""The CRD itself: structural (the API server would refuse it otherwise), one source of truth
for the plugin, and field for field the shape of the Go RepackRun API of the Volcano forks
(repack/v1alpha1/repackrun_types.go), so objects written by either implementation are valid for both.
The few status fields of our own (OWN_FIELDS) are optional where they attach, so an object the Go
implementation writes, which never has them, stays valid.
"""
from pathlib import Path

import pytest
import yaml

from kubectl_repack import schema

REPO = Path(__file__).parents[3]
CRD_FILE = REPO / "config" / "crd" / "repack.volcano.sh_repackruns.yaml"
PACKAGED = REPO / "kubectl_repack" / "data" / "repackruns-crd.yaml"

# The OpenAPI v3 subset a structural CRD schema may use (apiextensions.k8s.io/v1).
ALLOWED_KEYWORDS = {
    "type", "format", "description", "title", "properties", "required", "items",
    "additionalProperties", "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems", "multipleOf",
    "minProperties", "maxProperties", "allOf", "anyOf", "oneOf", "not", "default", "nullable",
    "example", "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type", "x-kubernetes-validations",
}
# Not allowed inside allOf/anyOf/oneOf/not of a structural schema.
FORBIDDEN_IN_JUNCTORS = {"type", "description", "default", "additionalProperties", "nullable"}

# Field names per object of the Go API (json tags of repackrun_types.go).
SELECTOR_TERM = {"include", "exclude"}
SELECTOR = {"selector", "names"}
GO_FIELDS = {
    "": {"apiVersion", "kind", "metadata", "spec", "status"},
    "spec": {"mode", "scope", "goals", "networkTopology", "maxPerRun", "eviction",
             "ttlSecondsAfterFinished"},
    "spec.goals[]": {"resource", "minFragImprovementPercent"},
    "spec.scope": {"podGroups", "nodes"},
    "spec.scope.podGroups": SELECTOR_TERM, "spec.scope.nodes": SELECTOR_TERM,
    "spec.scope.podGroups.include": SELECTOR, "spec.scope.podGroups.exclude": SELECTOR,
    "spec.scope.nodes.include": SELECTOR, "spec.scope.nodes.exclude": SELECTOR,
    "spec.scope.nodes.include.selector": {"matchLabels", "matchExpressions"},
    "spec.scope.nodes.include.selector.matchExpressions[]": {"key", "operator", "values"},
    "spec.networkTopology": {"hyperNodeTier", "hyperNodeTierName", "nodeBlockSize",
                             "requiredNodeBlocks", "mode"},
    "spec.maxPerRun": {"podGroups", "resources"},
    "spec.eviction": {"gracePeriodSeconds"},
    "status": {"phase", "conditions", "message", "startTime", "completionTime",
               "executionDeadline", "plan", "result", "relocations"},
    "status.conditions[]": {"type", "status", "observedGeneration", "lastTransitionTime",
                            "reason", "message"},
    "status.plan": {"summary", "moves", "freedNodes"},
    "status.plan.summary": {"fragBeforePercent", "fragAfterPercent", "freedNodeCount",
                            "movedCardCount", "resolvedScope"},
    "status.plan.summary.resolvedScope": {"podGroupCount", "nodeCount"},
    "status.plan.moves[]": {"namespace", "podGroupName", "owner", "cards", "pods"},
    "status.plan.moves[].owner": {"apiVersion", "kind", "name"},
    "status.plan.moves[].pods[]": {"name", "fromNode", "toNode", "cards"},
    "status.result": {"fragAfterPercent", "freedNodeCount", "freedNodes", "movedCardCount",
                      "metricsVerified"},
    "status.relocations[]": {"namespace", "podGroupName", "replacementPodGroupName",
                             "victimPodName", "victimPodUID", "schedulingRequirementsHash",
                             "plannedNodeName", "eviction", "placement"},
    "status.relocations[].eviction": {"phase", "message"},
    "status.relocations[].placement": {"phase", "selectedNodeName", "replacementPodName",
                                       "replacementPodUID", "actualNodeName"},
}
# Status fields the Go API does not have (TOPO-3: block counts of spec.networkTopology;
# RELIEF-3, EXEC-6: the planned nodes the run vacated and who took them), by the object they attach to.
# Never required there: objects of the Go implementation lack them.
NODE_BLOCKS = {"tier", "nodeBlockSize", "before", "after"}
OWN_FIELDS = {
    "spec": {"target"},
    "status.plan.summary": {"nodeBlocks", "target", "freedCapacity"},
    "status.result": {"nodeBlocks", "vacatedNodes", "target"},
}
# Lists of our own whose items name what they are about (required) and may say more (optional).
OWN_ITEMS = {"status.result.vacatedNodes[]": {"node"}, "status.plan.summary.target.placements[]": {"pod", "node"},
             "status.result.target.nominated[]": {"pod", "node"},
             "status.plan.summary.freedCapacity[]": {"nodes", "allocatable"}}
# Objects of our own with required fields of mixed types (spec.target: RELIEF-2).
OWN_REQUIRED = {"spec.target": ["podGroups"], "status.plan.summary.target": ["fits", "podGroups"],
                "status.result.target": ["bound", "podGroups"]}
OWN_OBJECTS = {  # objects wholly our own: every field, all required (one writer fills them all)
    "status.plan.summary.nodeBlocks": NODE_BLOCKS,
    "status.result.nodeBlocks": NODE_BLOCKS,
}

# Fields without omitempty/+optional in the Go API are required.
GO_REQUIRED = {
    "": ["spec"], "spec": ["mode"], "spec.goals[]": ["resource"],
    "spec.scope.nodes.include.selector.matchExpressions[]": ["key", "operator"],
    "status.plan.summary": ["fragBeforePercent", "fragAfterPercent", "freedNodeCount",
                            "movedCardCount"],
    "status.plan.summary.resolvedScope": ["podGroupCount", "nodeCount"],
    "status.plan.moves[]": ["namespace", "podGroupName"],
    "status.result": ["fragAfterPercent", "freedNodeCount", "movedCardCount", "metricsVerified"],
    "status.relocations[]": ["namespace", "plannedNodeName", "eviction", "placement"],
    "status.relocations[].eviction": ["phase"], "status.relocations[].placement": ["phase"],
}
# (path, keyword, value) of every kubebuilder marker and Go type that constrains a field.
GO_CONSTRAINTS = [
    ("spec.mode", "enum", ["DryRun", "Execute"]),
    ("spec.goals", "maxItems", 1),
    ("spec.goals[].minFragImprovementPercent", "minimum", 0),
    ("spec.goals[].minFragImprovementPercent", "maximum", 100),
    ("spec.goals[].minFragImprovementPercent", "format", "int32"),
    ("spec.scope.podGroups.include.names", "maxItems", 1024),
    ("spec.scope.nodes.exclude.names", "maxItems", 1024),
    ("spec.networkTopology.nodeBlockSize", "minimum", 1),
    ("spec.networkTopology.nodeBlockSize", "default", 1),
    ("spec.networkTopology.requiredNodeBlocks", "minimum", 0),
    ("spec.networkTopology.mode", "enum", ["binpack", "spread"]),
    ("spec.maxPerRun.podGroups", "minimum", 0),
    ("spec.maxPerRun.podGroups", "format", "int32"),
    ("spec.eviction.gracePeriodSeconds", "minimum", 0),
    ("spec.eviction.gracePeriodSeconds", "format", "int64"),
    ("spec.ttlSecondsAfterFinished", "minimum", 0),
    ("spec.ttlSecondsAfterFinished", "format", "int64"),
    ("status.phase", "enum", ["Pending", "Running", "Succeeded", "Failed"]),
    ("status.conditions", "x-kubernetes-list-type", "map"),
    ("status.conditions", "x-kubernetes-list-map-keys", ["type"]),
    ("status.startTime", "format", "date-time"),
    ("status.plan.moves", "maxItems", 4096),
    ("status.plan.moves[].pods", "maxItems", 4096),
    ("status.plan.freedNodes", "maxItems", 2048),
    ("status.plan.summary.fragBeforePercent", "maximum", 100),
    ("status.plan.summary.movedCardCount", "format", "int64"),
    ("status.result.freedNodes", "maxItems", 2048),
    ("status.result.metricsVerified", "type", "boolean"),
    ("status.relocations", "maxItems", 4096),
    ("status.relocations[].eviction.phase", "enum",
     ["Pending", "InProgress", "Accepted", "IndirectlyRemoved", "Rejected"]),
    ("status.relocations[].placement.phase", "enum",
     ["WaitingForReplacement", "WaitingForNodeSelection", "Nominated", "Placed", "TimedOut"]),
]


@pytest.fixture(scope="module")
def crd():
    return yaml.safe_load(CRD_FILE.read_text())


@pytest.fixture(scope="module")
def root(crd):
    (version,) = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def node_at(root, path):
    node = root
    for part in filter(None, path.split(".")):
        name, is_list = (part[:-2], True) if part.endswith("[]") else (part, False)
        node = node["properties"][name]
        if is_list:
            node = node["items"]
    return node


def walk(node, path="", in_junctor=False):
    """Yield (path, node, in_junctor) for every schema node."""
    yield path, node, in_junctor
    for name, sub in node.get("properties", {}).items():
        yield from walk(sub, f"{path}.{name}".lstrip("."), in_junctor)
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], path + "[]", in_junctor)
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], path + "{}", in_junctor)
    for junctor in ("allOf", "anyOf", "oneOf"):
        for sub in node.get(junctor, ()):
            yield from walk(sub, f"{path}<{junctor}>", True)
    if isinstance(node.get("not"), dict):
        yield from walk(node["not"], path + "<not>", True)


def test_packaged_crd_is_a_relative_symlink_to_the_config_file():
    assert PACKAGED.is_symlink()
    assert not Path(PACKAGED.readlink()).is_absolute()
    assert PACKAGED.resolve() == CRD_FILE.resolve()
    assert PACKAGED.read_bytes() == CRD_FILE.read_bytes()


def test_plugin_loads_the_same_crd(crd):
    assert schema.load_crd() == crd


def test_identity_scope_and_subresources(crd):
    spec = crd["spec"]
    assert (crd["apiVersion"], crd["kind"]) == ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    assert crd["metadata"]["name"] == "repackruns.repack.volcano.sh"
    assert spec["group"] == "repack.volcano.sh" and spec["scope"] == "Cluster"
    assert spec["names"] == {"kind": "RepackRun", "listKind": "RepackRunList",
                             "plural": "repackruns", "singular": "repackrun",
                             "shortNames": ["rpr", "repackrun"]}
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}


def test_printer_columns_match_the_go_markers(crd):
    columns = [(c["name"], c["type"], c["jsonPath"])
               for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]]
    assert columns == [
        ("MODE", "string", ".spec.mode"),
        ("RESOURCE", "string", ".spec.goals[0].resource"),
        ("PHASE", "string", ".status.phase"),
        ("REASON", "string", '.status.conditions[?(@.status=="True")].reason'),
        ("FRAG-BEFORE", "integer", ".status.plan.summary.fragBeforePercent"),
        ("FRAG-AFTER", "integer", ".status.plan.summary.fragAfterPercent"),
        ("PLAN-FREED", "integer", ".status.plan.summary.freedNodeCount"),
        ("ACTUAL-FREED", "integer", ".status.result.freedNodeCount"),
        ("AGE", "date", ".metadata.creationTimestamp"),
    ]


def test_schema_is_structural(root):
    problems = []
    for path, node, in_junctor in walk(root):
        unknown = set(node) - ALLOWED_KEYWORDS
        if unknown:
            problems.append(f"{path}: keywords not allowed in a CRD schema: {sorted(unknown)}")
        if in_junctor:
            if set(node) & FORBIDDEN_IN_JUNCTORS and not (
                    set(node) == {"type"} and path.endswith("<anyOf>")):
                problems.append(f"{path}: {sorted(set(node) & FORBIDDEN_IN_JUNCTORS)} inside a junctor")
            continue
        exempt = node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
        if not exempt and not node.get("type"):
            problems.append(f"{path}: no type")
        if "properties" in node and "additionalProperties" in node:
            problems.append(f"{path}: properties and additionalProperties together")
        if node.get("additionalProperties") is True:
            problems.append(f"{path}: additionalProperties: true")
        if node.get("x-kubernetes-int-or-string"):
            if node.get("anyOf") != [{"type": "integer"}, {"type": "string"}]:
                problems.append(f"{path}: int-or-string needs anyOf [integer, string]")
        if node.get("type") == "object" and "properties" not in node \
                and "additionalProperties" not in node and path != "metadata":
            problems.append(f"{path}: free-form object")
        for name in node.get("required", ()):
            if name not in node.get("properties", {}):
                problems.append(f"{path}: required {name} is not a property")
        for key in node.get("x-kubernetes-list-map-keys", ()):
            if key not in node["items"].get("required", ()):
                problems.append(f"{path}: list-map key {key} must be required")
    assert problems == []


def test_spec_preserves_no_unknown_fields(root):
    for path, node, _ in walk(node_at(root, "spec"), "spec"):
        assert not node.get("x-kubernetes-preserve-unknown-fields"), path
        assert node.get("additionalProperties") is not True, path


def test_metadata_is_left_to_the_server(root):
    assert node_at(root, "metadata") == {"type": "object"}


@pytest.mark.parametrize("path", sorted(GO_FIELDS), ids=lambda p: p or "(root)")
def test_fields_are_those_of_the_go_api(root, path):
    assert set(node_at(root, path)["properties"]) == GO_FIELDS[path] | OWN_FIELDS.get(path, set())


@pytest.mark.parametrize("path", sorted(OWN_OBJECTS))
def test_node_blocks_are_four_required_integers_in_an_optional_object(root, path):
    parent, _, name = path.rpartition(".")
    assert name not in node_at(root, parent).get("required", [])
    node = node_at(root, path)
    assert node["type"] == "object" and set(node["properties"]) == OWN_OBJECTS[path]
    assert sorted(node["required"]) == sorted(OWN_OBJECTS[path])
    assert {f: node["properties"][f]["type"] for f in OWN_OBJECTS[path]} == dict.fromkeys(OWN_OBJECTS[path], "integer")
    assert node["properties"]["nodeBlockSize"]["minimum"] == 1
    assert node["properties"]["before"]["minimum"] == node["properties"]["after"]["minimum"] == 0


def test_vacated_nodes_are_an_optional_list_of_nodes_and_who_took_them(root):
    assert "vacatedNodes" not in node_at(root, "status.result").get("required", [])
    vacated = node_at(root, "status.result.vacatedNodes")
    assert vacated["type"] == "array" and vacated["maxItems"] == node_at(root, "status.result.freedNodes")["maxItems"]
    item = node_at(root, "status.result.vacatedNodes[]")
    assert item["type"] == "object" and set(item["properties"]) == {"node", "takenBy"}
    assert item["required"] == sorted(OWN_ITEMS["status.result.vacatedNodes[]"])
    assert item["properties"]["node"]["type"] == "string"
    taken_by = item["properties"]["takenBy"]
    assert taken_by["type"] == "array" and taken_by["items"] == {"type": "string"}
    from kubectl_repack.engine.outcome import TAKEN_BY_PER_NODE
    assert taken_by["maxItems"] == TAKEN_BY_PER_NODE


@pytest.mark.parametrize("path", sorted(GO_REQUIRED), ids=lambda p: p or "(root)")
def test_required_fields_are_those_of_the_go_api(root, path):
    assert sorted(node_at(root, path).get("required", [])) == sorted(GO_REQUIRED[path])


def test_only_fields_the_go_api_requires_are_required(root):
    required = {path for path, node, junctor in walk(root) if node.get("required") and not junctor}
    required.discard("status.conditions[]")  # metav1.Condition's own required fields
    expressions = "spec.scope.nodes.include.selector.matchExpressions[]"
    expected = (set(GO_REQUIRED) - {expressions}) | set(OWN_OBJECTS) | set(OWN_ITEMS) | set(OWN_REQUIRED) | {
        f"spec.scope.{axis}.{side}.selector.matchExpressions[]"
        for axis in ("podGroups", "nodes") for side in ("include", "exclude")}
    assert required == expected


@pytest.mark.parametrize("path,keyword,value", GO_CONSTRAINTS, ids=lambda v: str(v))
def test_constraints_of_the_go_markers(root, path, keyword, value):
    assert node_at(root, path)[keyword] == value


def test_selector_schemas_are_identical_everywhere(root):
    selectors = [node_at(root, f"spec.scope.{axis}.{side}")
                 for axis in ("podGroups", "nodes") for side in ("include", "exclude")]
    def without_descriptions(node):
        if isinstance(node, dict):
            return {k: without_descriptions(v) for k, v in node.items() if k != "description"}
        return node
    assert all(without_descriptions(s) == without_descriptions(selectors[0]) for s in selectors)
    expressions = selectors[0]["properties"]["selector"]["properties"]["matchExpressions"]
    assert expressions["items"]["properties"]["operator"]["enum"] == [
        "In", "NotIn", "Exists", "DoesNotExist"]
    assert selectors[0]["properties"]["selector"]["properties"]["matchLabels"][
        "additionalProperties"] == {"type": "string"}


def test_resource_rule_is_both_cel_and_pattern(root):
    resource = node_at(root, "spec.goals[].resource")
    assert [r["rule"] for r in resource["x-kubernetes-validations"]] == ["self.contains('/')"]
    assert resource["pattern"] == "/"


def test_spec_is_immutable_by_a_transition_rule(root):
    rules = node_at(root, "spec")["x-kubernetes-validations"]
    assert rules[0]["rule"] == "self == oldSelf"
    assert "immutable" in rules[0]["message"]


def test_budget_may_only_name_the_goal_resource(root):
    rules = node_at(root, "spec")["x-kubernetes-validations"]
    budget = [r for r in rules if r.get("fieldPath") == ".maxPerRun.resources"]
    assert len(budget) == 1 and "goals.exists(g, g.resource == r)" in budget[0]["rule"]
    assert node_at(root, "spec.maxPerRun.resources")["maxProperties"] == 1


def test_every_cel_rule_is_evaluated_locally_or_needs_the_server(root):
    from kubectl_repack.policy_schema import policy_crd

    policy_root = policy_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    rules = {" ".join(r["rule"].split())
             for tree in (root, policy_root) for _, node, _ in walk(tree) for r in node.get("x-kubernetes-validations", ())}
    assert rules == set(schema.CEL_EQUIVALENTS) | set(schema.SERVER_ONLY_RULES)


def test_quantity_pattern_accepts_kubernetes_quantities(root):
    import re
    pattern = re.compile(node_at(root, "spec.maxPerRun.resources")["additionalProperties"]["pattern"])
    for good in ("8", "0", "500m", "2Gi", "1e3", "1.5", "+4", "1k"):
        assert pattern.search(good), good
    for bad in ("8 cards", "eight", "2GB", "", "1.2.3"):
        assert not pattern.search(bad), bad


def test_every_reason_the_api_writes_is_one_the_crd_accepts(root):
    """Condition reasons are a pattern, not an enum, in the CRD; every reason of api.run (the new
    RequiredNodeBlocksNotMet too) must match it, or the API server refuses the status write."""
    import re

    from kubectl_repack.api.run import ALL_REASONS

    reason = node_at(root, "status.conditions[].reason")
    assert "enum" not in reason
    assert "RequiredNodeBlocksNotMet" in ALL_REASONS
    for r in sorted(ALL_REASONS):
        assert re.search(reason["pattern"], r) and reason["minLength"] <= len(r) <= reason["maxLength"], r


@pytest.mark.parametrize("path", sorted(OWN_REQUIRED))
def test_target_objects_are_optional_and_require_what_they_name(root, path):
    parent, _, name = path.rpartition(".")
    assert name not in node_at(root, parent).get("required", [])
    assert sorted(node_at(root, path)["required"]) == OWN_REQUIRED[path]
