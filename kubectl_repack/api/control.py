"""Who may cause a run's evictions, and how a run is stopped: the names and rules shared by the
admission webhook (which fills in the creator), the admission policy the API server enforces (which
vouches for it), the in-cluster controller (which asks the API server whether that user may evict,
seals the records it writes, and honours cancel and delete) and the plugin (`kubectl repack cancel`,
`apply --local`, `plan --save`).

The creator record (SEC-1). Three annotations name the user who created the run, as the API server
authenticated them: CREATOR_USERNAME/UID/GROUPS_ANNOTATION. They are filled in by whoever creates
the run (the plugin from a SelfSubjectReview, the mutating webhook for `kubectl apply`) and
*checked* by the ValidatingAdmissionPolicy CREATOR_POLICY_NAME (failurePolicy Fail, rendered by
kubectl_repack.deploy.manifests): on CREATE they must equal `request.userInfo`, on UPDATE they may
not change. Nothing is signed, so no endpoint can be asked to forge a record. Groups are frozen at
creation and no API can re-read them, so a record is trusted for CREATOR_MAX_AGE only: an Execute
that starts later is refused (`creator_problem`).

The records seal (SEC-2). The controller alone plans an Execute and writes its relocation records;
it seals the victims it chose (run uid, and each record's namespace, PodGroup, pod, uid and planned
node) with an HMAC keyed by a Secret only its ServiceAccount can read, into RECORDS_SEAL_ANNOTATION.
Whoever may write `repackruns/status` can report placements, but records it adds or changes do
not verify, and nothing is evicted on their word.

The run-state mark (SEC-2). What the status says of a run's progress is not trusted either: the
controller writes RUN_STATE_ANNOTATION (metadata, which the status subresource cannot change, and
which the admission policy CREATOR_POLICY_NAME lets the controller's account alone set, change or
remove) before it acts: `Started` with the execution deadline before a run's first status write of
its plan, `Finished` with the phase, reason and every record's eviction outcome before the status
that ends it. Sealed like the records (run uid included), so a mark of another run does not
verify. A run marked Finished stays finished whatever its status says; one marked Started is never
planned again; a started run's execution deadline is the one its mark holds. While a run is going,
its Started mark also holds every record's outcome once it settled (SETTLED_EVICTIONS), written
again before the status write that shows a new one: a settled record whose status says otherwise
is put back from the mark and never acted on again (`settled_outcomes`).
"""
from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from .run import COND_COMPLETE, COND_FAILED, EVICTION_ACCEPTED, EVICTION_INDIRECTLY_REMOVED, EVICTION_REJECTED
from .view import ObjectView, as_map

CANCEL_ANNOTATION = "repack.volcano.sh/cancel"               # "true": stop before the next eviction
EXECUTOR_ANNOTATION = "repack.volcano.sh/executor"           # "local": the plugin carries the run out itself
EXECUTOR_LOCAL = "local"
CREATOR_USERNAME_ANNOTATION = "repack.volcano.sh/creator-username"
CREATOR_UID_ANNOTATION = "repack.volcano.sh/creator-uid"
CREATOR_GROUPS_ANNOTATION = "repack.volcano.sh/creator-groups"   # the groups, joined by GROUP_SEPARATOR
CREATOR_ANNOTATIONS = (CREATOR_USERNAME_ANNOTATION, CREATOR_UID_ANNOTATION, CREATOR_GROUPS_ANNOTATION)
GROUP_SEPARATOR = ","
# What runs made before the admission policy carried: a JSON user and an HMAC handed out by the
# webhook on request. Neither is trusted any more; such runs are refused with a reason saying so.
LEGACY_CREATOR_ANNOTATIONS = ("repack.volcano.sh/creator", "repack.volcano.sh/creator-signature")
LEGACY_SIGNING_SECRET_NAME = "repack-run-signing-key"        # deleted by install and uninstall
CREATOR_POLICY_NAME = "repack-run-creator"                   # the ValidatingAdmissionPolicy and its binding
POD_WRITE_POLICY_NAME = "repack-pod-writes"                  # what the coordinator's/controller's pod patches may do
REPLACEMENT_POD_POLICY_NAME = "repack-replacement-pods"      # who may create a pod carrying repack's marks
NOMINATION_POLICY_NAME = "repack-nominations"               # the coordinator's pods/status writes (RELIEF-3)
CONTROLLER_WRITES_POLICY_NAME = "repack-controller-writes"    # the controller's writes to the webhook's objects
RUN_STATUS_POLICY_NAME = "repack-coordinator-run-status"     # the coordinator's writes to a run's status
ADMISSION_POLICY_NAMES = (CREATOR_POLICY_NAME, POD_WRITE_POLICY_NAME, REPLACEMENT_POD_POLICY_NAME,
                          NOMINATION_POLICY_NAME, CONTROLLER_WRITES_POLICY_NAME, RUN_STATUS_POLICY_NAME)
CREATOR_MAX_AGE = dt.timedelta(hours=1)
RECORDS_SEAL_ANNOTATION = "repack.volcano.sh/records-seal"
RECORDS_DIGEST_ANNOTATION = "repack.volcano.sh/records-digest"   # set by the controller's account only (admission)
RUN_STATE_ANNOTATION = "repack.volcano.sh/run-state"          # written by the controller's account only
FINALIZER = "repack.volcano.sh/stop-before-delete"
# Set by `kubectl repack apply` (anyone may): the run's execution deadline from its start, and the
# cluster-wide cooldown to store (as `apply --local --cooldown` does). Durations like "10m".
TIMEOUT_ANNOTATION = "repack.volcano.sh/execution-timeout"
COOLDOWN_ANNOTATION = "repack.volcano.sh/execute-cooldown"
# Bounds of what those annotations may say (SEC-4: every duration read from an annotation is bounded).
MAX_EXECUTION_TIMEOUT = dt.timedelta(hours=24)
MAX_COOLDOWN = dt.timedelta(days=7)
CONTROLLER_LEASE_NAME = "repack-controller"
EXECUTE_LEASE_NAME = "repack-execute"               # the cluster-wide execute mutex (engine.mutex)
SEAL_SECRET_NAME = "repack-controller-seal-key"              # read by the controller's account only
SEAL_SECRET_KEY = "key"
SEAL_VERSION = "v1"

TRUE_VALUES = frozenset({"true", "yes", "1"})


@dataclass(frozen=True)
class Creator:
    """The authenticated user who created a run (admission userInfo; `extra` is not recorded:
    the admission policy cannot compare it, so nothing is authorized on its word)."""
    username: str
    uid: str = ""
    groups: tuple = ()

    @classmethod
    def from_user_info(cls, info: Any) -> "Creator":
        """From an authentication.k8s.io/v1 UserInfo (admission request, SelfSubjectReview)."""
        info = as_map(info)
        groups = info.get("groups")
        return cls(str(info.get("username") or ""), str(info.get("uid") or ""),
                   tuple(str(g) for g in groups) if isinstance(groups, (list, tuple)) else ())

    def annotations(self) -> dict:
        """The three annotations that record this user (what the admission policy compares)."""
        return {CREATOR_USERNAME_ANNOTATION: self.username, CREATOR_UID_ANNOTATION: self.uid,
                CREATOR_GROUPS_ANNOTATION: GROUP_SEPARATOR.join(self.groups)}


class UntrustedCreator(ValueError):
    """The run carries no creator record that may be acted on; the message says why."""


def creator_of(run: Mapping[str, Any]) -> Creator:
    """The creator recorded on the run; UntrustedCreator when there is none (or only a legacy stamp)."""
    ann = ObjectView(run).annotations
    if ann.get(CREATOR_USERNAME_ANNOTATION) is None:
        if any(ann.get(k) for k in LEGACY_CREATOR_ANNOTATIONS):
            raise UntrustedCreator("the run carries a creator stamp of an older kubectl-repack, which could be "
                                   "forged; re-create the run (kubectl delete, then apply it again)")
        raise UntrustedCreator(f"no creator record (annotation {CREATOR_USERNAME_ANNOTATION}, filled in when the run "
                               f"is created and checked by the admission policy {CREATOR_POLICY_NAME})")
    username = str(ann.get(CREATOR_USERNAME_ANNOTATION) or "")
    if not username:
        raise UntrustedCreator(f"annotation {CREATOR_USERNAME_ANNOTATION} names no user")
    groups = str(ann.get(CREATOR_GROUPS_ANNOTATION) or "")
    return Creator(username, str(ann.get(CREATOR_UID_ANNOTATION) or ""),
                   tuple(groups.split(GROUP_SEPARATOR)) if groups else ())


def creator_problem(run: Mapping[str, Any], now: dt.datetime, parse_time, policy_created: Optional[dt.datetime],
                    max_age: dt.timedelta = CREATOR_MAX_AGE) -> str:
    """Why the run's creator record may not authorize a *new* start of the run ('' when it may).

    The record is vouched for only if the admission policy existed when the run was created
    (`policy_created`: the later of the policy's and its binding's creationTimestamp; None when
    either is missing), and only while it is fresh: the groups in it are those of creation time."""
    created = parse_time(ObjectView(run).meta.get("creationTimestamp"))
    if policy_created is None:
        return (f"the admission policy {CREATOR_POLICY_NAME} (or its binding) is not installed, so no creator record "
                "can be trusted; run `kubectl repack install`")
    if created is None:
        return "the run has no metadata.creationTimestamp"
    if created < policy_created:
        return (f"the run was created before the admission policy {CREATOR_POLICY_NAME} that vouches for its creator "
                "record; re-create the run")
    age = now - created
    if age > max_age:
        return (f"its creator record is {_human(age)} old, older than the {_human(max_age)} a record is trusted "
                "(the creator's groups are read when the run is created and cannot be read again); "
                "re-create the run to execute it")
    return ""


def _human(delta: dt.timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds >= 3600:
        return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"


# --- the records seal (SEC-2) -----------------------------------------------------------------------
_SEALED_FIELDS = ("namespace", "podGroupName", "victimPodName", "victimPodUID", "plannedNodeName")


def _sealed_bytes(run_uid: str, records: Sequence[Mapping[str, Any]]) -> bytes:
    victims = [[str(as_map(r).get(f) or "") for f in _SEALED_FIELDS] for r in records]
    return json.dumps({"run": run_uid, "records": victims}, separators=(",", ":"), ensure_ascii=True).encode()


def seal(key: bytes, run_uid: str, records: Sequence[Mapping[str, Any]]) -> str:
    """The seal annotation's value for these records of the run with uid `run_uid`."""
    return f"{SEAL_VERSION}:" + hmac.new(key, _sealed_bytes(run_uid, records), hashlib.sha256).hexdigest()


def records_digest(run_uid: str, records: Sequence[Mapping[str, Any]]) -> str:
    """The records-digest annotation's value: a plain sha256 over exactly what `seal` covers.

    It needs no key, so readers that must not hold the seal key (the webhook, the coordinator) can
    verify records against it; it is worth something only because admission lets no one but the
    controller's account (and, on a locally executed run, a user who may read the seal key) write
    it (kubectl_repack.deploy.policies). Why not an asymmetric signature (the controller signs, the
    readers hold only the public key)? The standard library has no public-key signatures, so it would
    need a new crypto dependency in every process, plus a key pair to distribute and rotate; the API
    server already authenticates and authorizes who writes the annotation, which is all a reader
    needs to know, and the controller still checks its own HMAC seal before every eviction."""
    return f"sha256:{hashlib.sha256(_sealed_bytes(run_uid, records)).hexdigest()}"


def seal_problem(run: Mapping[str, Any], key: bytes) -> str:
    """'' when the run's records are the ones the controller sealed; else why they are not."""
    view = ObjectView(run)
    records = view.status.get("relocations")
    if not isinstance(records, list):
        return "status.relocations is not a list"
    got = view.annotations.get(RECORDS_SEAL_ANNOTATION)
    if not isinstance(got, str) or not got:
        return (f"the relocation records carry no seal (annotation {RECORDS_SEAL_ANNOTATION}): the controller "
                "did not write them")
    want = seal(key, view.uid, records)
    if not hmac.compare_digest(got.encode("utf-8", "replace"), want.encode()):
        return (f"the relocation records do not match their seal (annotation {RECORDS_SEAL_ANNOTATION}): "
                "they were added or changed by someone other than the controller")
    return ""


# --- the run-state mark (SEC-2) ----------------------------------------------------------------------
STATE_STARTED, STATE_FINISHED = "Started", "Finished"
# The eviction phases after which the executor never acts on a record again: sealed as they settle.
SETTLED_EVICTIONS = frozenset({EVICTION_ACCEPTED, EVICTION_INDIRECTLY_REMOVED, EVICTION_REJECTED})


@dataclass(frozen=True)
class RunState:
    """What the controller vouches for about a run's progress (RUN_STATE_ANNOTATION): `Started`
    (with the execution deadline it wrote, '' when none, and in `evictions` each record's outcome
    once it settled, '' while it has not) or `Finished` (with the phase and reason it ended with
    and each record's eviction phase), `evictions` in record order."""
    state: str
    deadline: str = ""
    phase: str = ""
    reason: str = ""
    evictions: tuple = ()

    @property
    def finished(self) -> bool:
        return self.state == STATE_FINISHED

    def fields(self) -> dict:
        return {"state": self.state, "deadline": self.deadline, "phase": self.phase, "reason": self.reason,
                "evictions": list(self.evictions)}


def settled_outcomes(evictions: Sequence[str]) -> dict:
    """{record index: eviction phase} of the records whose outcome a mark's `evictions` hold as
    settled (SETTLED_EVICTIONS): what no status write can turn back into one to act on."""
    return {i: phase for i, phase in enumerate(evictions) if phase in SETTLED_EVICTIONS}


class BadStateMark(ValueError):
    """The run carries a run-state mark the controller did not write for it; the message says why."""


def _state_mac(key: bytes, run_uid: str, fields: Mapping[str, Any]) -> str:
    body = json.dumps({"run": run_uid, "state": fields}, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return f"{SEAL_VERSION}:" + hmac.new(key, body.encode(), hashlib.sha256).hexdigest()


def state_mark(key: bytes, run_uid: str, state: RunState) -> str:
    """RUN_STATE_ANNOTATION's value for `state` of the run with uid `run_uid`."""
    fields = state.fields()
    return json.dumps(dict(fields, seal=_state_mac(key, run_uid, fields)), sort_keys=True, separators=(",", ":"))


def read_state_mark(run: Mapping[str, Any], key: bytes) -> Optional[RunState]:
    """The run-state mark the controller wrote on this run; None when the run carries none.
    BadStateMark when there is one but it is malformed or was not sealed for this run."""
    view = ObjectView(run)
    raw = view.annotations.get(RUN_STATE_ANNOTATION)
    if raw is None:
        return None
    where = f"annotation {RUN_STATE_ANNOTATION}"
    try:
        got = json.loads(str(raw))
    except ValueError:
        raise BadStateMark(f"{where} is not the controller's mark (not JSON)") from None
    if not isinstance(got, dict) or not isinstance(got.get("seal"), str) or \
            not isinstance(got.get("evictions", []), list):
        raise BadStateMark(f"{where} is not the controller's mark")
    state = RunState(str(got.get("state") or ""), str(got.get("deadline") or ""), str(got.get("phase") or ""),
                     str(got.get("reason") or ""), tuple(str(e) for e in got.get("evictions") or ()))
    want = _state_mac(key, view.uid, state.fields())
    if state.state not in (STATE_STARTED, STATE_FINISHED) or \
            not hmac.compare_digest(got["seal"].encode("utf-8", "replace"), want.encode()):
        raise BadStateMark(f"{where} does not match its seal: the controller did not write it for this run")
    return state


def state_disagreement(run: Mapping[str, Any], state: RunState) -> str:
    """Where the run's status departs from what its mark vouches for ('' where it does not): for a
    finished run the phase, the reason of its terminal condition and each record's eviction phase;
    for a started one the execution deadline."""
    st = ObjectView(run).status
    if not state.finished:
        got = str(st.get("executionDeadline") or "")
        return (f"status.executionDeadline {got or None} is not the {state.deadline or None} the controller set "
                "when it started the run") if got != state.deadline else ""
    if st.get("phase") != state.phase:
        return f"status.phase {st.get('phase') or None} is not the {state.phase} the run ended with"
    ended = [as_map(c).get("reason") for c in st.get("conditions") or () if as_map(c).get("type") in
             (COND_COMPLETE, COND_FAILED) and as_map(c).get("status") == "True"]
    if ended != [state.reason]:
        return f"the terminal condition of status.conditions is not the {state.reason} the run ended with"
    records = st.get("relocations") if isinstance(st.get("relocations"), list) else []
    phases = tuple(str(as_map(as_map(r).get("eviction")).get("phase") or "") for r in records)
    if phases != state.evictions:
        return "the eviction phases of status.relocations are not the ones the run ended with"
    return ""


def cancel_requested(run: Optional[Mapping[str, Any]]) -> str:
    """Why the run must stop before its next eviction ('' when it need not)."""
    view = ObjectView(run)
    if view.deleting:
        return "the RepackRun is being deleted"
    value = str(view.annotations.get(CANCEL_ANNOTATION) or "").strip().lower()
    if value in TRUE_VALUES:
        return f"cancelled (annotation {CANCEL_ANNOTATION}={value})"
    return ""


def executed_locally(run: Optional[Mapping[str, Any]]) -> bool:
    """The plugin carries this run out itself (`apply --local`, `plan --save`): the controller leaves it."""
    return str(ObjectView(run).annotations.get(EXECUTOR_ANNOTATION) or "") == EXECUTOR_LOCAL


def finalizer_removal(run: Mapping[str, Any]) -> list:
    """JSON patch taking FINALIZER off the run ([] when it has none); its `test` op makes the API
    server refuse (422) if the finalizers changed since `run` was read. Used by the controller and
    by uninstall."""
    current = list(ObjectView(run).meta.get("finalizers") or [])
    if FINALIZER not in current:
        return []
    return [{"op": "test", "path": "/metadata/finalizers", "value": current},
            {"op": "replace", "path": "/metadata/finalizers", "value": [f for f in current if f != FINALIZER]}]


def run_durations(run: Optional[Mapping[str, Any]], parse) -> dict:
    """{'timeout': ..., 'cooldown': ...} from the run's annotations, parsed with `parse` (a duration
    parser raising ValueError); only those present. A bad value, or one past its bound
    (MAX_EXECUTION_TIMEOUT, MAX_COOLDOWN), raises ValueError naming the annotation."""
    ann = ObjectView(run).annotations
    out = {}
    for key, annotation, bound in (("timeout", TIMEOUT_ANNOTATION, MAX_EXECUTION_TIMEOUT),
                                   ("cooldown", COOLDOWN_ANNOTATION, MAX_COOLDOWN)):
        if ann.get(annotation) is not None:
            try:
                value = parse(str(ann[annotation]))
            except (ValueError, OverflowError, TypeError) as e:
                raise ValueError(f"metadata.annotations[{annotation}]: {str(ann[annotation])[:64]!r}: {e}") from None
            if value > bound:
                raise ValueError(f"metadata.annotations[{annotation}]: {str(ann[annotation])[:64]!r} is longer than "
                                 f"the {_human(bound)} allowed")
            out[key] = value
    return out
