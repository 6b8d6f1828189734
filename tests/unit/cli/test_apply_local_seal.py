"""apply --local seals its records when its user may read the records-seal key (SEC-2: the webhook
and the coordinator steer only by records that verify), and says plainly when it may not."""
from __future__ import annotations

from kubectl_repack.api.control import (RECORDS_DIGEST_ANNOTATION, RECORDS_SEAL_ANNOTATION, records_digest, seal,
                                        seal_problem)
from kubectl_repack.commands.apply import _local_seal
from kubectl_repack.errors import ClusterAPIError
from kubectl_repack.kube import incluster

KEY = b"s" * 32


class Store:
    def __init__(self):
        self.annotations, self.calls = {}, 0

    def annotate_all(self, name, annotations):
        self.calls += 1
        self.annotations.update({(name, key): value for key, value in annotations.items()})


def test_a_user_who_may_read_the_key_seals_what_the_webhook_verifies(monkeypatch):
    monkeypatch.setattr(incluster, "read_key", lambda api, ns: KEY if ns == "repack-system" else None)
    store = Store()
    sealer, why_not = _local_seal(object(), store, "run-1", "repack-system")
    assert why_not == ""
    records = [{"namespace": "a", "victimPodName": "p", "plannedNodeName": "n"}]
    run = {"metadata": {"name": "run-1", "uid": "u-1"}, "status": {"relocations": records}}
    sealer(run, records)
    value = store.annotations[("run-1", RECORDS_SEAL_ANNOTATION)]
    assert value == seal(KEY, "u-1", records)
    # with the digest the webhook and the coordinator verify, in the same patch (SEC-2)
    assert store.annotations[("run-1", RECORDS_DIGEST_ANNOTATION)] == records_digest("u-1", records)
    assert store.calls == 1
    run["metadata"]["annotations"] = {RECORDS_SEAL_ANNOTATION: value}
    assert seal_problem(run, KEY) == ""


def test_without_the_key_no_seal_and_a_warning_naming_the_secret(monkeypatch):
    def forbidden(api, ns):
        raise ClusterAPIError("secrets \"repack-controller-seal-key\" is forbidden (HTTP 403)", 403)

    monkeypatch.setattr(incluster, "read_key", forbidden)
    sealer, why_not = _local_seal(object(), Store(), "run-1", "repack-system")
    assert sealer is None
    assert "no placement hint" in why_not and "repack-system/repack-controller-seal-key" in why_not
    assert "apply without --local" in why_not
    monkeypatch.setattr(incluster, "read_key", lambda api, ns: None)
    sealer, why_not = _local_seal(object(), Store(), "run-1", "repack-system")
    assert sealer is None and "does not exist" in why_not
