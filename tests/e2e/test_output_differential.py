"""kubectl_repack.printing against the real kubectl, byte for byte.

Three RepackRuns (a finished Execute with a full status written through the status subresource, a
scoped DryRun with a plan, a bare run without status) are read back with `kubectl get -o json
--show-managed-fields` (jsonpath sees managedFields; `-o json` hides them unless asked), and every
template of the corpus is rendered both by `kubectl get repackrun NAME -o jsonpath=T` (and over
the List that `kubectl get repackruns -l ...` prints) and by the module on the fetched JSON. Any
difference is a failure of the module. Where kubectl fails (exit code != 0), the module must raise
JSONPathError; messages are not compared.

Go visits map entries in random order for `.*` and `..`; templates that use them over maps with
several keys are compared as multisets of space-separated words (marked UNORDERED).
"""
from __future__ import annotations

import json
import subprocess
import uuid

import pytest

from kubectl_repack.printing import JSONPathError, custom_columns, jsonpath, names
from tests.harness import NPU_RESOURCE

pytestmark = pytest.mark.e2e

GROUP, VERSION = "repack.volcano.sh", "v1alpha1"
UNORDERED = "unordered"
FAILS = "fails"          # kubectl exits non-zero on the Execute run (and the list)
T0, T1 = "2026-07-30T10:00:00Z", "2026-07-30T10:04:12Z"


def _run(name: str, token: str, spec: dict, labels: dict | None = None) -> dict:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "RepackRun",
            "metadata": {"name": f"{name}-{token}",
                         "labels": {"repack-e2e-output": token, **(labels or {})}},
            "spec": spec}


EXECUTE_STATUS = {
    "phase": "Succeeded",
    "message": "goal met <frag 33% -> 0%> & 1 replacement bound elsewhere",
    "startTime": T0, "completionTime": T1,
    "conditions": [
        {"type": "Planned", "status": "True", "reason": "RepackRecommended", "lastTransitionTime": T0,
         "message": "plan frees 1 node", "observedGeneration": 1},
        {"type": "Executing", "status": "False", "reason": "Finished", "lastTransitionTime": T1,
         "message": "all relocations settled"},
        {"type": "Complete", "status": "True", "reason": "ExecutionCompletedWithAlternativePlacement",
         "lastTransitionTime": T1, "message": "goal met; 1 replacement bound elsewhere"},
    ],
    "plan": {
        "summary": {"fragBeforePercent": 33, "fragAfterPercent": 0, "freedNodeCount": 1,
                    "movedCardCount": 3, "resolvedScope": {"podGroupCount": 4, "nodeCount": 6}},
        "moves": [
            {"namespace": "repack-demo", "podGroupName": "train-a",
             "owner": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train-a"},
             "cards": 2,
             "pods": [{"name": "train-a-worker-0", "fromNode": "n1", "toNode": "n2", "cards": 1},
                      {"name": "train-a-worker-1", "fromNode": "n1", "toNode": "n3", "cards": 1}]},
            {"namespace": "repack-demo", "podGroupName": "infer-b", "cards": 1,
             "pods": [{"name": "infer-b-0", "fromNode": "n1", "toNode": "n3", "cards": 1}]},
        ],
        "freedNodes": ["n1"],
    },
    "result": {"fragAfterPercent": 0, "freedNodeCount": 1, "freedNodes": ["n1"], "movedCardCount": 3,
               "metricsVerified": True},
    "relocations": [
        {"namespace": "repack-demo", "podGroupName": "train-a", "victimPodName": "train-a-worker-0",
         "victimPodUID": "9b1f0c1e-0000-4000-8000-000000000001", "plannedNodeName": "n2",
         "schedulingRequirementsHash": "sha256:abc",
         "eviction": {"phase": "Accepted"},
         "placement": {"phase": "Placed", "selectedNodeName": "n2", "actualNodeName": "n2",
                       "replacementPodName": "train-a-worker-0"}},
        {"namespace": "repack-demo", "podGroupName": "train-a", "victimPodName": "train-a-worker-1",
         "plannedNodeName": "n3",
         "eviction": {"phase": "Accepted"},
         "placement": {"phase": "Placed", "selectedNodeName": "n3", "actualNodeName": "n2",
                       "replacementPodName": "train-a-worker-1"}},
        {"namespace": "repack-demo", "podGroupName": "infer-b", "victimPodName": "infer-b-0",
         "plannedNodeName": "n3",
         "eviction": {"phase": "Rejected", "message": "PDB infer-b allows 0 disruptions"},
         "placement": {"phase": "WaitingForReplacement"}},
    ],
}

DRYRUN_STATUS = {
    "phase": "Succeeded",
    "startTime": T0, "completionTime": T0,
    "conditions": [
        {"type": "Planned", "status": "False", "reason": "InsufficientImprovement", "lastTransitionTime": T0,
         "message": "fragmentation drops 4 points, 10 required"},
        {"type": "Complete", "status": "True", "reason": "DryRunCompleted", "lastTransitionTime": T0,
         "message": "dry run: nothing evicted"},
    ],
    "plan": {"summary": {"fragBeforePercent": 12, "fragAfterPercent": 8, "freedNodeCount": 0,
                         "movedCardCount": 1},
             "moves": [{"namespace": "team-x", "podGroupName": "solo", "cards": 1,
                        "pods": [{"name": "solo-0", "fromNode": "n4", "toNode": "n5", "cards": 1}]}],
             "freedNodes": []},
}

SCOPE = {
    "podGroups": {"include": {"selector": {"matchLabels": {"repack.volcano.sh/eligible": "true"}},
                              "names": ["repack-demo/train-a", "repack-demo/infer-b"]},
                  "exclude": {"names": ["repack-demo/protected"]}},
    "nodes": {"include": {"selector": {"matchLabels": {"accelerator-pool": "ascend-npu"}}},
              "exclude": {"names": ["n8", "n9"]}},
}

# (template, flags). Every construct of the dialect, the seed's queries, and templates kubectl
# refuses or fails on.
JSONPATH = [
    ("{.metadata.name}", ()),
    ("name={.metadata.name} mode={.spec.mode}\n", ()),
    ("{.status.plan.summary.fragBeforePercent}", ()),
    ("{.status.plan.summary.fragBeforePercent}% -> {.status.plan.summary.fragAfterPercent}%", ()),
    ('{range .status.relocations[*]}{.victimPodName}{"\\t"}{.placement.phase}{"\\n"}{end}', ()),
    ('{.status.conditions[?(@.type=="Planned")].status}', ()),
    ('{.status.conditions[?(@.type=="Planned")].reason}', ()),
    ("{.status.conditions[?(@.type!='Planned')].type}", ()),
    ('{.status.conditions[?(@.status == "True")].type}', ()),
    ("{.status.conditions[?(@.observedGeneration)].type}", ()),
    ("{.status.conditions[?(@.observedGeneration >= 1)].type}", ()),
    ("{.status.conditions[?(@.observedGeneration < 1)].type}", ()),
    ('{.status.conditions[?(@.type > "E")].type}', ()),
    ('{.status.conditions[?(@.type <= "E")].type}', ()),
    ("{.status.plan.moves[?(@.cards > 1)].podGroupName}", ()),
    ("{.status.plan.moves[*].pods[?(@.toNode=='n3')].name}", ()),
    ("{.status.relocations[?(@.eviction.message)].victimPodName}", ()),
    ("{.status.relocations[?(@.placement.actualNodeName != @.plannedNodeName)].victimPodName}", ()),
    ("{.status.result.metricsVerified}", ()),
    ("{.status.relocations[?(@.placement.phase=='Placed')].placement.actualNodeName}", ()),
    ("{.status.result}", ()),
    ("{.status.plan.freedNodes}", ()),
    ("{.status.plan.moves[0]}", ()),
    ("{.status.plan.moves[0].owner}", ()),
    ("{.spec.goals}", ()),
    ("{.spec.scope}", ()),
    ("{.status.message}", ()),
    ("{.status.conditions[0].type}", ()),
    ("{.status.conditions[-1].type}", ()),
    ("{.status.conditions[1:3].type}", ()),
    ("{.status.conditions[::2].type}", ()),
    ("{.status.conditions[-2:].reason}", ()),
    ("{.status.conditions[*].type}", ()),
    ("{.status.conditions[0,2].type}", ()),
    ("{.status.conditions[0]['type','reason']}", ()),
    ("{.status.plan.summary['fragBeforePercent','fragAfterPercent']}", ()),
    ("{.metadata['name']}", ()),
    ("{.status['plan.summary.movedCardCount']}", ()),
    ("{.metadata.labels.repack-e2e-output}", ()),
    ("{.spec.scope.podGroups.include.selector.matchLabels.repack\\.volcano\\.sh/eligible}", ()),
    ("{.status.plan.moves[*].pods[*].name}", ()),
    ("{.status.plan.summary.resolvedScope.*}", (UNORDERED,)),
    ("{.status.plan.moves[0].owner.*}", (UNORDERED,)),
    ("{.spec.scope.nodes.exclude.names.*}", ()),
    ("{..victimPodName}", ()),
    ("{.status..fromNode}", ()),
    ("{..phase}", (UNORDERED,)),
    ("{..freedNodes}", (UNORDERED,)),
    ("{.status.relocations[*]..phase}", (UNORDERED,)),
    ("{$.kind}/{$.metadata.name}", ()),
    ("{@.apiVersion}", ()),
    ('{"literal"}{\'\\t\'}{"\\u00e9\\x41"}', ()),
    ("{.metadata.name.*}", ()),
    ("{.status.nothing}|{.nothing.deeper[0]}|{.status.conditions[?(@.nothing=='x')].type}", ()),
    ("{range .status.conditions[*]}{.type}={.status}{\",\"}{end}", ()),
    ("{range .status.plan.moves[*]}{.podGroupName}:{range .pods[*]}{.name}@{.fromNode}>{.toNode} {end};{end}", ()),
    ("{range .status.relocations[*]}{.victimPodName}{\" \"}", ()),
    ("{range .status.conditions[?(@.status=='True')]}[{.type}]{end}", ()),
    ("{range .status.nothing[*]}{.x}{end}after", ()),
    ("{true} {3} {-1.5} {.status.plan.summary.movedCardCount}", ()),
    ("{.status.plan.summary.resolvedScope}", ()),
    # kubectl refuses or fails on these
    ("{.metadata.name", (FAILS,)),
    ("{.status.conditions[5].type}", (FAILS,)),
    ("{.status.conditions[0:9]}", (FAILS,)),
    ("{.status.conditions[2:1]}", (FAILS,)),
    ("{.status.conditions[::0]}", (FAILS,)),
    ("{.metadata[0]}", (FAILS,)),
    ("{.status.plan.summary.fragBeforePercent[?(@.x)]}", (FAILS,)),
    ('{.status.plan.moves[?(@.cards == "2")].podGroupName}', (FAILS,)),
    ("{.status.plan.moves[?(@.cards > 1.5)].podGroupName}", (FAILS,)),
    ("{.status.plan.moves[?(@.cards <> 1)].podGroupName}", (FAILS,)),
    ("{.status.plan.moves[?(@.pods[*].cards == 1)].podGroupName}", (FAILS,)),
    ("{nonsense}", (FAILS,)),
    ("{end}", (FAILS,)),
    ("{*}", (FAILS,)),
    ("{[1}", (FAILS,)),
    ("{.status.conditions[?(@.type=='x']}", (FAILS,)),
    ("{........}", (FAILS,)),
    ('{"\\q"}', (FAILS,)),
    ("{.status.conditions[a]}", (FAILS,)),
    ("{+1.2.3}", (FAILS,)),
]

# The List: kubectl's `{"kind": "List", "items": [...]}` of every run.
LIST_JSONPATH = [
    ("{.items[*].metadata.name}", ()),
    ('{range .items[*]}{.metadata.name}{"\\t"}{.status.phase}{"\\t"}{.status.plan.summary.fragBeforePercent}{"\\n"}{end}', ()),
    ("{.items[?(@.spec.mode=='Execute')].metadata.name}", ()),
    ("{.items[?(@.status.phase)].metadata.name}", ()),
    ('{range .items[*]}{.metadata.name}:{range .status.conditions[?(@.status=="True")]}{.type},{end}{"\\n"}{end}', ()),
    ("{.kind} {.apiVersion} {.metadata}", ()),
    ("{.items[*].status.relocations[*].victimPodName}", ()),
    ("{.items[-1:].spec.mode}", ()),
    ("{..podGroupName}", (UNORDERED,)),
    ("{.items[*]['metadata.name', 'spec.mode']}", ()),
]

CUSTOM_COLUMNS = [
    "NAME:.metadata.name,MODE:.spec.mode,PHASE:.status.phase",
    "name:.metadata.name,frag-before:.status.plan.summary.fragBeforePercent,after:{.status.plan.summary.fragAfterPercent}",
    "NAME:metadata.name,FREED:.status.plan.freedNodes,VICTIMS:.status.relocations[*].victimPodName",
    "PLANNED:.status.conditions[?(@.type=='Planned')].status,REASON:.status.conditions[?(@.type=='Planned')].reason",
    "OWNER:.status.plan.moves[0].owner,GOALS:.spec.goals,LABELS:.metadata.labels",
    "SCOPE:.spec.scope.nodes.exclude.names,MSG:.status.message",
    "N:.metadata.name,NOTHING:.status.nothing,EMPTY:",
]
CUSTOM_COLUMNS_FAILING = [
    "X:.status.conditions[7]",          # index out of range on the runs with a status
    "NAME",                             # no path
    "A:{.a}}",                          # not a relaxed path
    "A:.a[",                            # does not parse
]


@pytest.fixture(scope="module")
def runs(control_plane):
    token = uuid.uuid4().hex[:6]
    bodies = [
        (_run("exec", token, {"mode": "Execute", "goals": [{"resource": NPU_RESOURCE,
                                                              "minFragImprovementPercent": 10}],
                              "maxPerRun": {"podGroups": 2, "resources": {NPU_RESOURCE: 8}},
                              "eviction": {"gracePeriodSeconds": 30}},
              {"change-ticket": "chg-1"}), EXECUTE_STATUS),
        (_run("dry", token, {"mode": "DryRun", "scope": SCOPE,
                             "goals": [{"resource": NPU_RESOURCE, "minFragImprovementPercent": 10}]}),
         DRYRUN_STATUS),
        (_run("bare", token, {"mode": "DryRun", "goals": [{"resource": NPU_RESOURCE}]}), None),
    ]
    names_ = []
    try:
        for body, status in bodies:
            name = body["metadata"]["name"]
            control_plane.kubectl("create", "-f", "-", input=json.dumps(body))
            names_.append(name)
            if status is not None:
                control_plane.kubectl("patch", "repackrun", name, "--subresource=status", "--type=merge",
                                      "-p", json.dumps({"status": status}))
        objs = {n: json.loads(control_plane.kubectl("get", "repackrun", n, "-o", "json",
                                                    "--show-managed-fields").stdout)
                for n in names_}
        # the status really went through the subresource
        assert objs[names_[0]]["status"]["relocations"][2]["eviction"]["phase"] == "Rejected"
        selector = f"repack-e2e-output={token}"
        lst = json.loads(control_plane.kubectl("get", "repackruns", "-l", selector, "-o", "json",
                                               "--show-managed-fields").stdout)
        assert [i["metadata"]["name"] for i in lst["items"]] == sorted(names_)
        yield {"names": names_, "objs": objs, "selector": selector, "list": lst}
    finally:
        for n in names_:
            control_plane.kubectl("delete", "repackrun", n, "--wait=false", check=False)


def _same(kubectl_out: str, mine: str, flags) -> bool:
    if UNORDERED in flags:
        return sorted(kubectl_out.split(" ")) == sorted(mine.split(" "))
    return kubectl_out == mine


def _compare(control_plane, args: list[str], render, flags=(), expect_failure=None, exit_codes=None):
    """kubectl with args vs render(); returns a failure description or None. expect_failure:
    whether kubectl itself must fail (so a template meant to fail cannot pass by printing)."""
    p = control_plane.kubectl(*args, check=False)
    if exit_codes is not None:
        exit_codes.append(p.returncode)
    if expect_failure is not None and (p.returncode != 0) != expect_failure:
        return f"kubectl {args} exited {p.returncode}, expected {'failure' if expect_failure else 'success'}: " \
               f"{(p.stdout + p.stderr)[:300]!r}"
    try:
        mine, err = render(), None
    except JSONPathError as e:
        mine, err = None, e
    if p.returncode != 0:
        if err is None:
            return f"kubectl {args} failed ({p.stderr.strip()[:300]}) but the module printed {mine!r}"
        return None
    if err is not None:
        return f"kubectl {args} printed {p.stdout!r} but the module raised {err}"
    if not _same(p.stdout, mine, flags):
        return f"kubectl {args}:\n  kubectl: {p.stdout!r}\n  module:  {mine!r}"
    return None


@pytest.mark.parametrize("template,flags", JSONPATH, ids=[t for t, _ in JSONPATH])
def test_jsonpath_matches_kubectl_on_each_run(control_plane, runs, template, flags):
    failures = []
    for n in runs["names"]:
        obj = runs["objs"][n]
        failures.append(_compare(control_plane, ["get", "repackrun", n, "-o", f"jsonpath={template}"],
                                 lambda: jsonpath(template, obj), flags,
                                 expect_failure=(FAILS in flags) if n == runs["names"][0] else None))
    failures = [f for f in failures if f]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("template,flags", JSONPATH + LIST_JSONPATH,
                         ids=[t for t, _ in JSONPATH + LIST_JSONPATH])
def test_jsonpath_matches_kubectl_on_the_list(control_plane, runs, template, flags):
    failure = _compare(control_plane, ["get", "repackruns", "-l", runs["selector"], "-o", f"jsonpath={template}"],
                       lambda: jsonpath(template, runs["list"]), flags,
                       expect_failure=False if (template, flags) in LIST_JSONPATH else None)
    assert failure is None, failure


@pytest.mark.parametrize("template", [
    "{.status.phase}",
    "{.status.nothing}",
    "{.status.conditions[?(@.observedGeneration==1)].type}",
    "{range .status.relocations[*]}{.eviction.message}{end}",
])
def test_jsonpath_without_missing_keys_matches_kubectl(control_plane, runs, template):
    failures = [_compare(control_plane, ["get", "repackrun", n, "-o", f"jsonpath={template}",
                                         "--allow-missing-template-keys=false"],
                         lambda: jsonpath(template, runs["objs"][n], allow_missing_keys=False))
                for n in runs["names"]]
    failures = [f for f in failures if f]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("template", [
    "{.status.plan.summary}",
    "{.status.conditions[*].type}",
    "{range .status.relocations[*]}{.victimPodName}{end}",
    "{.status.nothing}",
])
def test_jsonpath_as_json_matches_kubectl(control_plane, runs, template):
    failures = [_compare(control_plane, ["get", "repackrun", n, "-o", f"jsonpath-as-json={template}"],
                         lambda: jsonpath(template, runs["objs"][n], as_json=True))
                for n in runs["names"]]
    failures = [f for f in failures if f]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("spec", CUSTOM_COLUMNS + CUSTOM_COLUMNS_FAILING)
def test_custom_columns_match_kubectl(control_plane, runs, spec):
    fails = spec in CUSTOM_COLUMNS_FAILING
    failures = [_compare(control_plane, ["get", "repackrun", n, "-o", f"custom-columns={spec}"],
                         lambda: custom_columns(spec, [runs["objs"][n]]),
                         expect_failure=fails if n == runs["names"][0] else None)
                for n in runs["names"]]
    failures.append(_compare(control_plane, ["get", "repackruns", "-l", runs["selector"],
                                             "-o", f"custom-columns={spec}"],
                             lambda: custom_columns(spec, runs["list"]), expect_failure=fails))
    failures.append(_compare(control_plane, ["get", "repackruns", "-l", runs["selector"], "--no-headers",
                                             "-o", f"custom-columns={spec}"],
                             lambda: custom_columns(spec, runs["list"]["items"], no_headers=True)))
    failures = [f for f in failures if f]
    assert not failures, "\n".join(failures)


def test_name_matches_kubectl(control_plane, runs):
    for n in runs["names"]:
        out = control_plane.kubectl("get", "repackrun", n, "-o", "name").stdout
        assert out == names(runs["objs"][n]) == f"repackrun.repack.volcano.sh/{n}\n"
    out = control_plane.kubectl("get", "repackruns", "-l", runs["selector"], "-o", "name").stdout
    assert out == names(runs["list"])
    assert out.count("\n") == 3


def test_the_corpus_is_not_vacuous(control_plane, runs):
    """A few templates with what kubectl must print, so the comparisons above compare content."""
    execute, dry, bare = runs["names"]

    def get(name, template):
        return control_plane.kubectl("get", "repackrun", name, "-o", f"jsonpath={template}").stdout

    assert get(execute, '{range .status.relocations[*]}{.victimPodName}{"\\t"}{.placement.phase}{"\\n"}{end}') == \
        "train-a-worker-0\tPlaced\ntrain-a-worker-1\tPlaced\ninfer-b-0\tWaitingForReplacement\n"
    assert get(dry, '{.status.conditions[?(@.type=="Planned")].status}') == "False"
    assert get(execute, "{.status.plan.summary.fragBeforePercent}") == "33"
    assert get(execute, "{.status.plan.moves[0].owner}") == \
        '{"apiVersion":"batch.volcano.sh/v1alpha1","kind":"Job","name":"train-a"}'
    assert get(execute, "{.status.message}") == "goal met <frag 33% -> 0%> & 1 replacement bound elsewhere"
    assert get(bare, "{.status.phase}") == ""
    table = control_plane.kubectl("get", "repackruns", "-l", runs["selector"], "-o",
                                  "custom-columns=NAME:.metadata.name,PLANNED:.status.conditions[?(@.type=='Planned')].status").stdout
    w = max(len(n) for n in runs["names"]) + 3
    assert table == "".join(f"{a.ljust(w)}{b}\n" for a, b in
                            [("NAME", "PLANNED"), (bare, "<none>"), (dry, "False"), (execute, "True")])


def _random_templates(seed: int, count: int) -> list[str]:
    """Templates from a small grammar of the dialect (fields of a RepackRun, indexes, slices,
    unions, filters, ranges with and without {end}, literals). `.*` and `..` are left out: over
    maps their order in kubectl is random."""
    import random

    rnd = random.Random(seed)
    fields = ["status", "conditions", "type", "reason", "status", "plan", "summary", "moves", "pods", "name",
              "fromNode", "toNode", "cards", "relocations", "victimPodName", "placement", "phase", "eviction",
              "metadata", "spec", "goals", "resource", "nope", "freedNodes", "fragBeforePercent", "message",
              "observedGeneration", "owner", "kind", "labels", "repack-e2e-output", "result", "metricsVerified"]

    def index():
        c = rnd.random()
        if c < .25:
            return f"[{rnd.randint(-4, 4)}]"
        if c < .4:
            return "[*]"
        if c < .55:
            a, b = rnd.choice(["", str(rnd.randint(-3, 3))]), rnd.choice(["", str(rnd.randint(-3, 4))])
            return f"[{a}:{b}{rnd.choice(['', ':', ':2', ':0'])}]"
        if c < .65:
            return f"[{rnd.randint(0, 2)},{rnd.randint(-2, 2)}]"
        if c < .72:
            return f"['{rnd.choice(fields)}']"
        left = "@" + "".join("." + rnd.choice(fields) for _ in range(rnd.randint(0, 2)))
        if rnd.random() < .3:
            return f"[?({left})]"
        right = rnd.choice(['"Planned"', "'True'", "'n3'", str(rnd.randint(-1, 3)), "1.5", "true", "@.cards",
                            '"Placed"', '"train-a"'])
        return f"[?({left}{rnd.choice(['', ' '])}{rnd.choice(['==', '!=', '<', '>', '<=', '>='])} {right})]"

    def path():
        p = rnd.choice(["", "$", "@"])
        for _ in range(rnd.randint(1, 5)):
            p += "." + rnd.choice(fields) if rnd.random() < .6 else index()
        return p

    def action():
        c = rnd.random()
        if c < .7:
            return "{" + path() + "}"
        if c < .8:
            return rnd.choice(['{"\\t"}', "{'|'}", '{"\\n"}', "{' '}"])
        body = "".join(action() for _ in range(rnd.randint(1, 3)))
        return "{range " + path() + "}" + body + rnd.choice(["{end}", "{end}", "{end}", ""])

    return ["".join(rnd.choice(["", "-", " x "]) + action() for _ in range(rnd.randint(1, 3)))
            for _ in range(count)]


def test_random_templates_match_kubectl(control_plane, runs, tmp_path):
    """200 templates from a grammar, on the Execute run, through `kubectl label --local -o
    jsonpath=` (the same printer as get, without a round trip to the API server)."""
    path = tmp_path / "run.json"
    path.write_text(json.dumps(runs["objs"][runs["names"][0]]))
    base = ["label", "--local", "-f", str(path), "zz-"]
    obj = json.loads(control_plane.kubectl(*base, "-o", "json", "--show-managed-fields").stdout)
    failures, codes = [], []
    for template in _random_templates(seed=14, count=200):
        failure = _compare(control_plane, [*base, "-o", f"jsonpath={template}"], lambda: jsonpath(template, obj),
                           exit_codes=codes)
        if failure:
            failures.append(failure)
    assert not failures, f"{len(failures)} of 200 differ:\n" + "\n".join(failures[:10])
    assert 20 < sum(c != 0 for c in codes) < 180       # the grammar exercises both outcomes


CLI_FORMATS = [
    "jsonpath={.status.plan.summary.fragBeforePercent}",
    'jsonpath={range .status.relocations[*]}{.victimPodName}{"\\t"}{.placement.phase}{"\\n"}{end}',
    'jsonpath={.status.conditions[?(@.type=="Planned")].status}',
    "jsonpath={.metadata.managedFields[0].manager}",
    "jsonpath-as-json={.status.plan.freedNodes}",
    "custom-columns=NAME:.metadata.name,PHASE:.status.phase,FREED:.status.plan.freedNodes",
    "name",
]


@pytest.mark.parametrize("fmt", CLI_FORMATS)
def test_status_prints_what_kubectl_get_prints(control_plane, runs, fmt):
    """The plugin's real entry point, through kubectl's plugin discovery: `kubectl repack status
    NAME -o FORMAT` prints byte for byte what `kubectl get repackrun NAME -o FORMAT` prints."""
    import os
    import sys

    bin_dir = os.path.dirname(sys.executable)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    for n in runs["names"]:
        want = control_plane.kubectl("get", "repackrun", n, "-o", fmt)
        got = subprocess.run([control_plane.cp.binaries["kubectl"], "repack", "status", n, "-o", fmt,
                              "--kubeconfig", control_plane.kubeconfig],
                             capture_output=True, text=True, env=env, timeout=120)
        assert got.returncode == 0, got.stderr
        assert got.stdout == want.stdout, (fmt, n)


def test_a_bad_template_is_refused_before_anything_is_read(control_plane, runs):
    import os
    import sys

    exe = os.path.join(os.path.dirname(sys.executable), "kubectl-repack")
    r = subprocess.run([exe, "status", runs["names"][0], "-o", "jsonpath={.a[}", "--kubeconfig", "/nonexistent"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.startswith("error: Invalid value for '-o' / '--output': error parsing jsonpath {.a[}, ")
