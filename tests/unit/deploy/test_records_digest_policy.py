"""The records digest rule of the creator admission policy (SEC-2): only the controller's account
sets, changes or removes `repack.volcano.sh/records-digest`; on a run executed locally also a user
who may get the seal-key Secret; no run is created with it. (The CEL is evaluated by the real API
server in tests/e2e/test_security_admission.py.)"""
from __future__ import annotations

from kubectl_repack.api.control import RECORDS_DIGEST_ANNOTATION
from kubectl_repack.deploy.policies import creator_policy


def _digest_rule(namespace: str = "ops") -> dict:
    (rule,) = [v for v in creator_policy(namespace)["spec"]["validations"] if RECORDS_DIGEST_ANNOTATION in v["expression"]]
    return rule


def test_no_run_is_created_with_a_digest_and_only_the_controller_changes_it():
    expr = _digest_rule()["expression"]
    create, update = expr.split(" : ", 1)
    assert create == f"request.operation == 'CREATE' ? !('{RECORDS_DIGEST_ANNOTATION}' in variables.ann)"
    assert f"['{RECORDS_DIGEST_ANNOTATION}'].all(k, (k in variables.ann) == (k in variables.old)" in update
    assert "variables.username == 'system:serviceaccount:ops:repack-controller'" in update
    assert _digest_rule()["reason"] == "Forbidden"


def test_a_seal_key_reader_may_write_it_on_a_locally_executed_run_only():
    update = _digest_rule("ops")["expression"].split(" : ", 1)[1]
    local, reader = ("'repack.volcano.sh/executor' in variables.ann && variables.ann['repack.volcano.sh/executor'] == 'local'",
                     "authorizer.group('').resource('secrets').namespace('ops').name('repack-controller-seal-key')"
                     ".check('get').allowed()")
    assert f"({local} && {reader})" in update


def test_the_refusal_names_the_annotation_and_the_secret():
    msg = _digest_rule("ops")["messageExpression"]
    assert RECORDS_DIGEST_ANNOTATION in msg and "ops/repack-controller-seal-key" in msg and "apply --local" in msg
