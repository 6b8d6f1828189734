"""The records digest (SEC-2): a keyless sha256 over exactly what the records seal covers, which the
webhook and the coordinator check records by (kubectl_repack.api.relocations.digest_problem)."""
from __future__ import annotations

import copy

from kubectl_repack.api.control import RECORDS_DIGEST_ANNOTATION, RECORDS_SEAL_ANNOTATION, records_digest, seal
from kubectl_repack.api.relocations import digest_problem, digest_verified

RECORDS = [{"namespace": "demo", "podGroupName": "pg", "victimPodName": "w-0", "victimPodUID": "u0",
            "plannedNodeName": "node-b", "eviction": {"phase": "Accepted"}}]


def a_run(records=RECORDS, uid="uid-1"):
    return {"metadata": {"name": "r", "uid": uid, "annotations": {RECORDS_DIGEST_ANNOTATION: records_digest(uid, records)}},
            "status": {"relocations": copy.deepcopy(records)}}


def test_the_digest_covers_what_the_seal_covers_and_nothing_else():
    moved = copy.deepcopy(RECORDS)
    moved[0]["eviction"] = {"phase": "Rejected"}    # not covered by the seal either
    assert records_digest("uid-1", moved) == records_digest("uid-1", RECORDS)
    assert seal(b"k" * 32, "uid-1", moved) == seal(b"k" * 32, "uid-1", RECORDS)
    for field in ("namespace", "podGroupName", "victimPodName", "victimPodUID", "plannedNodeName"):
        changed = copy.deepcopy(RECORDS)
        changed[0][field] = "other"
        assert records_digest("uid-1", changed) != records_digest("uid-1", RECORDS), field
    assert records_digest("uid-2", RECORDS) != records_digest("uid-1", RECORDS)
    assert records_digest("uid-1", RECORDS).startswith("sha256:")


def test_records_match_their_digest_without_any_key():
    assert digest_problem(a_run()) == "" and digest_verified(a_run())


def test_a_status_edit_an_added_record_or_a_missing_digest_is_named():
    steered = a_run()
    steered["status"]["relocations"][0]["plannedNodeName"] = "attackers-node"
    assert "do not match their digest" in digest_problem(steered) and not digest_verified(steered)
    added = a_run()
    added["status"]["relocations"].append(dict(RECORDS[0], victimPodName="w-1"))
    assert "do not match their digest" in digest_problem(added)
    sealed_only = a_run()
    sealed_only["metadata"]["annotations"] = {RECORDS_SEAL_ANNOTATION: seal(b"k" * 32, "uid-1", RECORDS)}
    assert RECORDS_DIGEST_ANNOTATION in digest_problem(sealed_only) and "no digest" in digest_problem(sealed_only)
    other_run = a_run(uid="uid-2")
    other_run["metadata"]["uid"] = "uid-1"       # a digest copied from another run
    assert "do not match" in digest_problem(other_run)
    not_a_list = a_run()
    not_a_list["status"]["relocations"] = {"x": 1}
    assert digest_problem(not_a_list) == "status.relocations is not a list"
