"""status.result.target (RELIEF-3) from what is read after the wait, and the one line
`kubectl repack status` shows for it."""
from __future__ import annotations

import datetime as dt

from kubectl_repack import render
from kubectl_repack.api.gates import TARGET_NODE_ANNOTATION, TARGET_RUN_ANNOTATION
from kubectl_repack.engine.outcome import target_result
from tests import builders as b

KEY = "repack-demo/big-pg"
VACATED = dt.datetime(2026, 7, 30, 10, 0, 0, 800000, tzinfo=dt.timezone.utc)
WAIT = dt.timedelta(seconds=30)


def member(i, on=None, scheduled="2026-07-30T10:00:05Z", nominated=""):
    ann = {TARGET_RUN_ANNOTATION: "relief-1/uid-1", TARGET_NODE_ANNOTATION: nominated} if nominated else {}
    p = b.pod(f"big-{i}", cards=4, ns="repack-demo", on=on, group="big-pg", annotations=ann,
              phase="Running" if on else "Pending")
    if on:
        p["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled}]
    return p


def group(min_member=2):
    return b.podgroup("big-pg", ns="repack-demo", min_member=min_member)


def test_bound_after_nomination():
    pods = [member(0, on="node-01", nominated="node-01", scheduled="2026-07-30T10:00:04Z"),
            member(1, on="node-01", nominated="node-01")]
    block = target_result([KEY], pods, {KEY: group()}, "relief-1/uid-1", VACATED, True, dt.timedelta(seconds=5))
    assert block == {"podGroups": [KEY], "bound": True, "vacatedAt": "2026-07-30T10:00:00.800000Z",
                     "boundAt": "2026-07-30T10:00:05Z", "boundAfterSeconds": 4.2,
                     "nominated": [{"pod": "repack-demo/big-0", "node": "node-01"},
                                   {"pod": "repack-demo/big-1", "node": "node-01"}],
                     "message": "bound 4.2 s after the nodes were vacated (2 pods nominated to node-01)"}
    assert render.target_line(block) == (f"{KEY}: bound 4.2 s after the nodes were vacated "
                                         "(2 pods nominated to node-01)")


def test_bound_on_its_own():
    pods = [member(0, on="node-01"), member(1, on="node-01")]
    block = target_result([KEY], pods, {KEY: group()}, "relief-1/uid-1", VACATED, True, dt.timedelta(0))
    assert block["bound"] and "nominated" not in block
    assert block["message"] == "bound 4.2 s after the nodes were vacated, on its own before any nomination " \
                               "(nothing nominated)"


def test_not_bound_in_time_and_nominations_by_another_run_are_not_ours():
    pods = [member(0, nominated="node-01"), member(1)]
    pods[0]["metadata"]["annotations"][TARGET_RUN_ANNOTATION] = "relief-1/uid-1"
    other = member(2, nominated="node-02")
    other["metadata"]["annotations"][TARGET_RUN_ANNOTATION] = "older/uid-0"
    block = target_result([KEY], pods + [other], {KEY: group()}, "relief-1/uid-1", VACATED, True, WAIT)
    assert block["bound"] is False and "boundAt" not in block and "boundAfterSeconds" not in block
    assert block["nominated"] == [{"pod": "repack-demo/big-0", "node": "node-01"}]
    assert block["message"] == ("not bound within 30 s after the nodes were vacated (1 pod nominated to node-01); "
                                "the room was made, the run is judged on the vacated nodes")


def test_deleted_and_not_vacated():
    gone = target_result([KEY], [], {KEY: None}, "relief-1/uid-1", VACATED, True, WAIT)
    assert gone["bound"] is False and gone["message"] == f"{KEY} deleted before it was bound (nothing nominated)"
    none = target_result([KEY], [member(0), member(1)], {KEY: group()}, "relief-1/uid-1", None, False, WAIT)
    assert "vacatedAt" not in none and none["message"] == "not bound; no planned node was vacated, nothing nominated"


def test_status_shows_the_target_line_and_the_wait_before_it_ends():
    run = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": "relief-1"},
           "spec": {"mode": "Execute", "target": {"podGroups": [KEY]}},
           "status": {"phase": "Running", "result": {"fragAfterPercent": 0, "freedNodeCount": 1, "movedCardCount": 2,
                                                      "metricsVerified": True, "target": {
                                                          "podGroups": [KEY], "bound": False,
                                                          "vacatedAt": "2026-07-30T10:00:00.800000Z"}}}}
    out = render.run_status(run)
    assert f"Target:      {KEY}: the planned nodes were vacated at 2026-07-30T10:00:00.800000Z; waiting for it " \
           "to be bound" in out
    run["status"]["result"]["target"].update(bound=True, message="bound 4.2 s after the nodes were vacated "
                                                                 "(2 pods nominated to node-01)")
    out = render.run_status(run)
    assert f"Target:      {KEY}: bound 4.2 s after the nodes were vacated (2 pods nominated to node-01)\n" in out
    del run["status"]["result"]["target"]
    assert "Target:" not in render.run_status(run)
