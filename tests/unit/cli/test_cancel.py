"""`kubectl repack cancel NAME`: the cancel annotation by merge patch, finished runs left alone."""
import copy

from kubectl_repack.api.control import CANCEL_ANNOTATION, cancel_requested
from kubectl_repack.kube.runs import RunStore
from tests.unit.cli.conftest import run
from tests.unit.cli.test_snapshot_status import EXECUTE
from tests.unit.kube.fake_server import RUNS, FakeServer

RUNNING = copy.deepcopy(EXECUTE)
RUNNING["status"] = {"phase": "Running", "conditions": [
    {"type": "Progressing", "status": "True", "reason": "Executing", "message": "evicting"}]}


def test_cancel_sets_the_annotation_and_says_so(fake_cluster):
    store = fake_cluster["store"]
    store.runs["ascend-execute-001"] = copy.deepcopy(RUNNING)
    r = run("cancel", "ascend-execute-001")
    assert r.exit_code == 0, r.output
    assert r.stdout == "repackrun.repack.volcano.sh/ascend-execute-001 cancel requested\n"
    assert ("annotate", "ascend-execute-001", CANCEL_ANNOTATION, "true") in store.calls
    assert cancel_requested(store.runs["ascend-execute-001"])


def test_cancel_o_name_prints_the_resource_name_only(fake_cluster):
    fake_cluster["store"].runs["ascend-execute-001"] = copy.deepcopy(RUNNING)
    r = run("cancel", "ascend-execute-001", "-o", "name")
    assert r.exit_code == 0 and r.stdout == "repackrun.repack.volcano.sh/ascend-execute-001\n"


def test_cancel_of_a_finished_run_changes_nothing(fake_cluster):
    store = fake_cluster["store"]
    store.runs["ascend-execute-001"] = copy.deepcopy(EXECUTE)
    r = run("cancel", "ascend-execute-001")
    assert r.exit_code == 0, r.output
    assert r.stdout == ("repackrun.repack.volcano.sh/ascend-execute-001 already finished (Succeeded, "
                        "ExecutionCompletedWithAlternativePlacement): nothing to cancel\n")
    assert not any(c[0] == "annotate" for c in store.calls)
    r = run("cancel", "ascend-execute-001", "-o", "name")
    assert r.stdout == "repackrun.repack.volcano.sh/ascend-execute-001\n" and "already finished" in r.stderr


def test_cancel_of_a_missing_run_exits_1(fake_cluster):
    r = run("cancel", "nope")
    assert r.exit_code == 1
    assert r.stderr == 'error: reading repackrun nope: repackruns.repack.volcano.sh "nope" not found (HTTP 404)\n'


def test_cancel_refuses_a_bad_name_before_connecting():
    r = run("cancel", "Bad_Name")
    assert r.exit_code == 2 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr


def test_run_store_annotate_is_a_merge_patch_on_metadata_only():
    server = FakeServer()
    server.objects[f"{RUNS}/r1"] = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun",
                                    "metadata": {"name": "r1", "annotations": {"keep": "me"}},
                                    "spec": {"mode": "Execute"}}
    out = RunStore(server.api).annotate("r1", CANCEL_ANNOTATION, "true")
    assert out["metadata"]["annotations"] == {"keep": "me", CANCEL_ANNOTATION: "true"}
    method, path, body, _ = server.requests[-1]
    assert (method, path) == ("PATCH", f"{RUNS}/r1")
    assert body == {"metadata": {"annotations": {CANCEL_ANNOTATION: "true"}}}


def test_run_store_annotate_names_the_run_when_missing():
    import pytest

    from kubectl_repack.errors import NotFound
    with pytest.raises(NotFound, match=r"^annotating repackrun gone: "):
        RunStore(FakeServer().api).annotate("gone", CANCEL_ANNOTATION, "true")
