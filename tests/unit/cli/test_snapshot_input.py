"""`plan --snapshot F` where F is not a snapshot: refused naming the file and what it holds (exit 2,
one `error:` line), never planned as an empty cluster."""
import os

import pytest

from tests.unit.cli.conftest import GUARDED, R, REPO, SEED3, run

EXECUTE_SAMPLE = os.path.join(REPO, "config", "samples", "ascend-execute-001.yaml")
NOT_A_SNAPSHOT = "a snapshot holds the cluster's Nodes and pods (`kubectl repack snapshot -o FILE` writes one)"


def refused(r, line):
    assert r.exit_code == 2, r.output
    assert r.stderr == f"error: {line}\n"
    assert r.stdout == "" and "Traceback" not in r.output


@pytest.mark.parametrize("text, holds", [
    ("", "is empty"),
    ("---\n# nothing here\n", "is empty"),
    ('{"apiVersion": "v1", "kind": "List", "items": []}', "holds an empty List"),
    ("apiVersion: v1\nkind: Status\nstatus: Failure\nmessage: forbidden\n", "holds 1 Status and no Node"),
    ("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Namespace\n"
     "metadata: {name: b}\n", "holds 2 Namespace and no Node"),
], ids=["empty", "comments-only", "empty-list", "status", "namespaces-only"])
def test_a_file_without_nodes_is_refused_saying_what_it_holds(tmp_path, text, holds):
    path = tmp_path / "snap.yaml"
    path.write_text(text)
    refused(run("plan", "--snapshot", path, "--resource", R), f"{path} {holds}: {NOT_A_SNAPSHOT}")


@pytest.mark.parametrize("run_file", [GUARDED, EXECUTE_SAMPLE], ids=["dryrun", "execute"])
def test_a_run_file_given_as_the_snapshot_asks_whether_the_flags_were_swapped(run_file):
    refused(run("plan", "--snapshot", run_file, "-f", GUARDED),
            f"{run_file} holds 1 RepackRun and no Node: did you swap -f and --snapshot?")


def test_empty_stdin_is_refused():
    refused(run("plan", "--snapshot", "-", "--resource", R, input=""), f"stdin is empty: {NOT_A_SNAPSHOT}")


def test_a_run_on_stdin_as_the_snapshot_is_refused():
    with open(GUARDED, encoding="utf-8") as f:
        text = f.read()
    refused(run("plan", "--snapshot", "-", "--resource", R, input=text),
            "stdin holds 1 RepackRun and no Node: did you swap -f and --snapshot?")


def test_a_mapping_without_kind_names_the_file_and_the_item(tmp_path):
    values = tmp_path / "values.yaml"   # a Helm values file
    values.write_text("image:\n  repository: x\n  tag: latest\nreplicas: 1\n")
    refused(run("plan", "--snapshot", values, "--resource", R),
            f"{values}: item #0: kind: required field is missing")


def test_an_unnamed_item_deeper_in_a_list_is_named_by_its_index(tmp_path):
    snap = tmp_path / "snap.json"
    snap.write_text('{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Node", '
                    '"metadata": {"name": "n1"}, "status": {"allocatable": {"%s": "8"}}}, {"apiVersion": "v1"}]}' % R)
    refused(run("plan", "--snapshot", snap, "--resource", R), f"{snap}: item #1: kind: required field is missing")


# ---------- a goal resource no node advertises ----------

SEED3_HAS = "nodes advertise: huawei.com/ascend-1980 (3 nodes)"


def test_a_resource_flag_no_node_advertises_is_refused_listing_what_they_do():
    refused(run("plan", "--snapshot", SEED3, "--resource", "huawei.com/ascend-1908"),
            f"spec.goals[0].resource: no node advertises huawei.com/ascend-1908 ({SEED3_HAS})")


def test_a_run_file_goal_no_node_advertises_is_refused(tmp_path):
    with open(GUARDED, encoding="utf-8") as f:
        text = f.read()
    assert text.count(R) >= 1
    path = tmp_path / "typo.yaml"
    path.write_text(text.replace(R, "huawei.com/ascend-1908"))
    refused(run("plan", "--snapshot", SEED3, "-f", path),
            f"spec.goals[0].resource: no node advertises huawei.com/ascend-1908 ({SEED3_HAS})")
