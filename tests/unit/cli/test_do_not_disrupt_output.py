"""`kubectl repack plan -o wide` says why a do-not-disrupt gang was not moved (BLOCKED CANDIDATES)."""
import json

import pytest

from tests.unit.cli.conftest import GUARDED, NOW, SEED3, as_json, flatten, run, seed3_objects

BATCH_PG = "repack-demo/ascend-batch-training-2f6c840d-8b14-4e45-a4cf-b43c249acbfd"


def snapshot_with(tmp_path, kind, name, key, value):
    objs = flatten(seed3_objects())
    (obj,) = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    obj["metadata"].setdefault("annotations", {})[key] = value
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}), encoding="utf-8")
    return str(path)


def blocked_rows(out):
    section = out.split("\nBLOCKED CANDIDATES\n", 1)[1].split("\n\n", 1)[0]
    header, *rows = section.splitlines()
    assert header.split() == ["NODE", "REASON", "POD", "FILTER", "MESSAGE"]
    return {r.split()[0]: r for r in rows}


@pytest.mark.parametrize("kind,name,key,value,source", [
    ("Pod", "ascend-batch-training-worker-1", "repack.volcano.sh/do-not-disrupt", "true",
     "pod repack-demo/ascend-batch-training-worker-1"),
    ("Job", "ascend-batch-training", "karpenter.sh/do-not-disrupt", "true", "VCJob repack-demo/ascend-batch-training"),
    ("Pod", "ascend-batch-training-worker-0", "cluster-autoscaler.kubernetes.io/safe-to-evict", "false",
     "pod repack-demo/ascend-batch-training-worker-0"),
], ids=["repack-on-pod", "karpenter-on-vcjob", "cluster-autoscaler-on-pod"])
def test_wide_names_the_annotation_that_pins_the_gang(tmp_path, kind, name, key, value, source):
    seed = run("plan", "--snapshot", SEED3, "-f", GUARDED, "--now", NOW, "-o", "json")
    assert [m["podGroupName"] for m in as_json(seed)["status"]["plan"]["moves"]] == [BATCH_PG.split("/")[1]]

    path = snapshot_with(tmp_path, kind, name, key, value)
    r = run("plan", "--snapshot", path, "-f", GUARDED, "--now", NOW, "-o", "wide")
    assert r.exit_code == 0, r.output
    assert "No moves." in r.stdout
    row = blocked_rows(r.stdout)["ascend-node-01"]
    assert row.split()[1:3] == ["DoNotDisrupt", "repack-demo/ascend-batch-training-worker-0"]
    assert f"do-not-disrupt: {source} is annotated {key}={value};" in row
    assert BATCH_PG in row
    assert "Message:        fragmentation 33% but no node can be vacated (1 DoNotDisrupt, 2 PodGroupOutOfScope)" \
        in r.stdout

    status = as_json(run("plan", "--snapshot", path, "-f", GUARDED, "--now", NOW, "-o", "json"))["status"]
    assert "moves" not in status["plan"] and status["conditions"][0]["reason"] == "InsufficientImprovement"
