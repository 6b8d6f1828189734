"""Hostile AdmissionReviews, generated: every field of a review of a replacement pod (one that
matches a relocation record, so the webhook reads all of it), replaced by values of the wrong type,
removed, or (strings) 100,000 characters long;
plus bodies that are not JSON, nested 50,000 deep, or carry integers past the digit limit. The
oracle for the webhook: never a 5xx; 400 with a JSON `reason`, or 200 allowing the pod (fail open)
with the request's uid echoed when the uid itself is intact. The webhook never refuses a pod.
"""
from __future__ import annotations

import copy
import json

import pytest

from tests.unit.webhook.builders import review_request, rs_pod
from tests.unit.webhook.serve_fixture import app as make_app

from .test_snapshot_objects import WRONG, _leaves, _render, _set

BASE = review_request(rs_pod("web-7f8d9c", "7f8d9c"), uid="hostile-uid")


_DELETE = object()  # the field removed


def _cases():
    for path, value in _leaves(BASE):
        if not path or value is None:
            continue
        for n, bad in enumerate(WRONG.get(type(value), [])):
            yield pytest.param(path, bad, id=f"{_render(path)}={json.dumps(bad)[:16]}#{n}")
        if not isinstance(path[-1], int):
            yield pytest.param(path, _DELETE, id=f"{_render(path)} removed")
        if isinstance(value, str):
            yield pytest.param(path, "x" * 100_000, id=f"{_render(path)}=100k chars")


CASES = list(_cases())


@pytest.fixture
def client():
    return make_app().test_client()


def _check(resp, uid_intact):
    assert resp.status_code in (200, 400), (resp.status_code, resp.get_data()[:300])
    body = resp.get_json()
    assert isinstance(body, dict), resp.get_data()[:300]
    if resp.status_code == 400:
        assert isinstance(body.get("reason"), str) and body["reason"]
    else:
        assert body["response"]["allowed"] is True
        if uid_intact:
            assert body["response"]["uid"] == "hostile-uid"


def test_the_base_review_gates_the_replacement(client):
    resp = client.post("/mutate", json=BASE)
    assert resp.status_code == 200 and "patch" in resp.get_json()["response"]


def test_there_are_hundreds_of_cases():
    assert len(CASES) >= 200


@pytest.mark.parametrize("path, bad", CASES)
def test_mutated_field_never_fails_the_webhook(client, path, bad):
    review = copy.deepcopy(BASE)
    if bad is _DELETE:
        parent = review
        for element in path[:-1]:
            parent = parent[element]
        del parent[path[-1]]
    else:
        _set(review, path, bad)
    _check(client.post("/mutate", data=json.dumps(review), content_type="application/json"),
           uid_intact=path[:2] != ("request", "uid"))


@pytest.mark.parametrize("body", [
    b"[" * 50000 + b"]" * 50000, b'{"a": ' + b"9" * 5000 + b"}", b"\xff\xfe", b"{", b"null", b"",
    b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": ' + b"[" * 3000 + b"]" * 3000 + b"}",
], ids=["nested-50000", "int-5000-digits", "not-utf8", "truncated", "null", "empty", "request-nested-3000"])
def test_bodies_that_are_not_reviews_are_400(client, body):
    resp = client.post("/mutate", data=body, content_type="application/json")
    assert resp.status_code == 400, resp.get_data()[:200]
    assert resp.get_json()["reason"]
