"""Who may cause a run's evictions, and how a run is stopped: the names and rules shared by the
admission webhook (which stamps the creator), the in-cluster controller (which verifies the stamp,
asks the API server whether that user may evict, and honours cancel and delete) and the plugin
(`kubectl repack cancel`, `apply --local`).

The creator stamp. On CREATE of a RepackRun the webhook writes the requesting user (the admission
request's userInfo, which the API server fills from the authenticated identity) into
`repack.volcano.sh/creator`, and an HMAC-SHA256 over the run's name, spec and that user into
`repack.volcano.sh/creator-signature`, keyed by a Secret only the in-cluster processes can read.
Whatever a user pre-fills is overwritten; if the webhook was not reached (it fails open), a
pre-filled stamp does not verify, and the controller refuses to evict for that run. The spec is
immutable (CRD rule), so a valid stamp cannot be moved to another spec; copied to a re-created run
of the same name and spec, it authorizes exactly what its creator authorized.
"""
from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from .run import as_map

CANCEL_ANNOTATION = "repack.volcano.sh/cancel"               # "true": stop before the next eviction
EXECUTOR_ANNOTATION = "repack.volcano.sh/executor"           # "local": the plugin carries the run out itself
EXECUTOR_LOCAL = "local"
CREATOR_ANNOTATION = "repack.volcano.sh/creator"
CREATOR_SIGNATURE_ANNOTATION = "repack.volcano.sh/creator-signature"
FINALIZER = "repack.volcano.sh/stop-before-delete"
# Set by `kubectl repack apply` (anyone may): the run's execution deadline from its start, and the
# cluster-wide cooldown to store (as `apply --local --cooldown` does). Durations like "10m".
TIMEOUT_ANNOTATION = "repack.volcano.sh/execution-timeout"
COOLDOWN_ANNOTATION = "repack.volcano.sh/execute-cooldown"
CONTROLLER_LEASE_NAME = "repack-controller"
SIGNING_SECRET_NAME = "repack-run-signing-key"
SIGNING_SECRET_KEY = "key"
SIGNATURE_VERSION = "v1"

TRUE_VALUES = frozenset({"true", "yes", "1"})


@dataclass(frozen=True)
class Creator:
    """The authenticated user who created a run (admission userInfo)."""
    username: str
    uid: str = ""
    groups: tuple = ()
    extra: Mapping[str, tuple] = field(default_factory=dict)

    @classmethod
    def from_user_info(cls, info: Any) -> "Creator":
        info = as_map(info)
        extra = {str(k): tuple(str(x) for x in (v or ())) for k, v in as_map(info.get("extra")).items()}
        return cls(str(info.get("username") or ""), str(info.get("uid") or ""),
                   tuple(str(g) for g in (info.get("groups") or ())), extra)

    def to_dict(self) -> dict:
        out: dict = {"username": self.username}
        if self.uid:
            out["uid"] = self.uid
        if self.groups:
            out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = {k: list(v) for k, v in sorted(self.extra.items())}
        return out


def _canonical(name: str, spec: Any, creator: Creator) -> bytes:
    return json.dumps({"name": name, "spec": spec, "creator": creator.to_dict()}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=True).encode()


def sign(key: bytes, name: str, spec: Any, creator: Creator) -> str:
    """The signature annotation's value for this run and creator."""
    return f"{SIGNATURE_VERSION}:" + hmac.new(key, _canonical(name, spec, creator), hashlib.sha256).hexdigest()


def stamp_annotations(key: bytes, name: str, spec: Any, creator: Creator) -> dict:
    """The two annotations the webhook writes on CREATE."""
    return {CREATOR_ANNOTATION: json.dumps(creator.to_dict(), sort_keys=True, separators=(",", ":")),
            CREATOR_SIGNATURE_ANNOTATION: sign(key, name, spec, creator)}


class UntrustedCreator(ValueError):
    """The run carries no creator stamp that verifies; the message says why."""


def verified_creator(run: Mapping[str, Any], key: bytes) -> Creator:
    """The run's creator if its stamp verifies against `key`; UntrustedCreator otherwise."""
    meta = as_map(run.get("metadata"))
    ann = as_map(meta.get("annotations"))
    raw, sig = ann.get(CREATOR_ANNOTATION), ann.get(CREATOR_SIGNATURE_ANNOTATION)
    if not raw or not sig:
        raise UntrustedCreator(f"no creator record (annotations {CREATOR_ANNOTATION} and "
                               f"{CREATOR_SIGNATURE_ANNOTATION} are written by the repack admission webhook "
                               "when the run is created; it was not reached)")
    try:
        creator = Creator.from_user_info(json.loads(raw))
    except (ValueError, TypeError, AttributeError) as e:
        raise UntrustedCreator(f"annotation {CREATOR_ANNOTATION} is not a user record: {e}") from None
    if not creator.username:
        raise UntrustedCreator(f"annotation {CREATOR_ANNOTATION} names no user")
    if not hmac.compare_digest(str(sig), sign(key, str(meta.get("name") or ""), run.get("spec"), creator)):
        raise UntrustedCreator(f"annotation {CREATOR_SIGNATURE_ANNOTATION} does not verify (written or changed by "
                               "someone other than the repack admission webhook)")
    return creator


def cancel_requested(run: Optional[Mapping[str, Any]]) -> str:
    """Why the run must stop before its next eviction ('' when it need not)."""
    meta = as_map(as_map(run).get("metadata"))
    if meta.get("deletionTimestamp"):
        return "the RepackRun is being deleted"
    value = str(as_map(meta.get("annotations")).get(CANCEL_ANNOTATION) or "").strip().lower()
    if value in TRUE_VALUES:
        return f"cancelled (annotation {CANCEL_ANNOTATION}={value})"
    return ""


def executed_locally(run: Optional[Mapping[str, Any]]) -> bool:
    """The plugin carries this run out itself (`apply --local`, `plan --save`): the controller leaves it."""
    ann = as_map(as_map(as_map(run).get("metadata")).get("annotations"))
    return str(ann.get(EXECUTOR_ANNOTATION) or "") == EXECUTOR_LOCAL


def finalizer_removal(run: Mapping[str, Any]) -> list:
    """JSON patch taking FINALIZER off the run ([] when it has none); its `test` op makes the API
    server refuse (422) if the finalizers changed since `run` was read. Used by the controller and
    by uninstall."""
    current = list(as_map(as_map(run).get("metadata")).get("finalizers") or [])
    if FINALIZER not in current:
        return []
    return [{"op": "test", "path": "/metadata/finalizers", "value": current},
            {"op": "replace", "path": "/metadata/finalizers", "value": [f for f in current if f != FINALIZER]}]


def run_durations(run: Optional[Mapping[str, Any]], parse) -> dict:
    """{'timeout': ..., 'cooldown': ...} from the run's annotations, parsed with `parse` (a duration
    parser raising ValueError); only those present. A bad value raises ValueError naming the annotation."""
    ann = as_map(as_map(as_map(run).get("metadata")).get("annotations"))
    out = {}
    for key, annotation in (("timeout", TIMEOUT_ANNOTATION), ("cooldown", COOLDOWN_ANNOTATION)):
        if ann.get(annotation) is not None:
            try:
                out[key] = parse(str(ann[annotation]))
            except (ValueError, OverflowError) as e:
                raise ValueError(f"metadata.annotations[{annotation}]: {ann[annotation]!r}: {e}") from None
    return out
