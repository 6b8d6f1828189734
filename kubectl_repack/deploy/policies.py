"""The ValidatingAdmissionPolicies of the install (SEC-1, SEC-5) and their bindings: who created a
RepackRun, which pod writes the in-cluster processes may make, which pods may claim a relocation,
which nominations the coordinator may write."""
from __future__ import annotations

from typing import Optional

from kubectl_repack.api.control import (CONTROLLER_WRITES_POLICY_NAME, CREATOR_GROUPS_ANNOTATION, CREATOR_POLICY_NAME,
                                        CREATOR_UID_ANNOTATION, RUN_STATUS_POLICY_NAME,
                                        CREATOR_USERNAME_ANNOTATION, EXECUTOR_ANNOTATION, EXECUTOR_LOCAL,
                                        GROUP_SEPARATOR, NOMINATION_POLICY_NAME, POD_WRITE_POLICY_NAME,
                                        RECORDS_DIGEST_ANNOTATION, REPLACEMENT_POD_POLICY_NAME, RUN_STATE_ANNOTATION,
                                        SEAL_SECRET_NAME)

from kubectl_repack.api.installed import NAMESPACE

from .parts import CONTROLLER_NAME, COORDINATOR_NAME, Manifest, object_meta


def _cel_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def creator_policy(namespace: str = NAMESPACE) -> Manifest:
    """SEC-1: the API server vouches for the creator of a RepackRun and of a RepackPolicy. On CREATE
    the three creator annotations must equal `request.userInfo` (username, uid, groups joined by
    GROUP_SEPARATOR); on UPDATE they may not be added, changed or removed. One exception (POLICY-1, POLICY-2):
    the controller's account (in `namespace`) creates the runs of RepackPolicies, and each carries
    its policy's record, so every SubjectAccessReview asks about the user who created the policy;
    only that account, and only for a RepackRun a RepackPolicy owns, may set a record that is not
    its own (which policy's record it copies is the controller's to get right: it copies the owner's). failurePolicy Fail: a policy that cannot
    be evaluated refuses, it never lets a record through unchecked. `extra` is not compared (CEL has
    no stable rendering of it), so nothing is authorized on it (SubjectAccessReviews omit it). The
    run-state mark (RUN_STATE_ANNOTATION, SEC-2) may be set, changed or removed by the controller's
    account only. So may the records digest (RECORDS_DIGEST_ANNOTATION, SEC-2), which the webhook
    and the coordinator verify records by without holding the seal key; on a run executed locally
    (`apply --local`) also by a user who may read the seal key (who could seal records anyway); and
    no run is created with it."""
    user, uid, groups = (_cel_string(k) for k in (CREATOR_USERNAME_ANNOTATION, CREATOR_UID_ANNOTATION,
                                                  CREATOR_GROUPS_ANNOTATION))
    sep = _cel_string(GROUP_SEPARATOR)
    keys = f"[{user}, {uid}, {groups}]"
    state, digest = _cel_string(RUN_STATE_ANNOTATION), _cel_string(RECORDS_DIGEST_ANNOTATION)
    executor, local = _cel_string(EXECUTOR_ANNOTATION), _cel_string(EXECUTOR_LOCAL)
    seal_reader = (f"authorizer.group('').resource('secrets').namespace({_cel_string(namespace)})"
                   f".name({_cel_string(SEAL_SECRET_NAME)}).check('get').allowed()")
    controller = _cel_string(f"system:serviceaccount:{namespace}:{CONTROLLER_NAME}")
    fix = ("object.kind + ': the creator annotations must name the user creating it; kubectl repack plan --save and "
           "apply fill them in, and so does the repack webhook for kubectl apply; without them set metadata.annotations "
           f"{CREATOR_USERNAME_ANNOTATION}: \"' + variables.username + '\", {CREATOR_UID_ANNOTATION}: \"' + "
           f"variables.uid + '\", {CREATOR_GROUPS_ANNOTATION}: \"' + variables.groups + '\" "
           "(kubectl auth whoami -o yaml shows them)'")
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": object_meta(CREATOR_POLICY_NAME),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["repack.volcano.sh"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                "resources": ["repackruns", "repackpolicies"]}]},
            "variables": [
                {"name": "ann", "expression": "has(object.metadata.annotations) ? object.metadata.annotations : {}"},
                {"name": "old", "expression": "request.operation == 'UPDATE' && has(oldObject.metadata.annotations)"
                                              " ? oldObject.metadata.annotations : {}"},
                {"name": "username", "expression": "has(request.userInfo.username) ? request.userInfo.username : ''"},
                {"name": "uid", "expression": "has(request.userInfo.uid) ? request.userInfo.uid : ''"},
                {"name": "groupList", "expression": "has(request.userInfo.groups) ? request.userInfo.groups : []"},
                {"name": "groups", "expression": f"variables.groupList.join({sep})"},
                # a run the controller creates for a RepackPolicy that owns it, with the policy's record
                {"name": "policyRun", "expression": f"object.kind == 'RepackRun' && variables.username == {controller} && "
                                                    "has(object.metadata.ownerReferences) && "
                                                    "object.metadata.ownerReferences.exists(r, r.kind == 'RepackPolicy' && "
                                                    "r.apiVersion.startsWith('repack.volcano.sh/')) && "
                                                    f"{user} in variables.ann && variables.ann[{user}] != '' && "
                                                    f"{uid} in variables.ann && {groups} in variables.ann"},
            ],
            "validations": [
                {"expression": f"request.operation != 'CREATE' || !variables.groupList.exists(g, g.contains({sep}))",
                 "messageExpression": f"object.kind + ': a group of the creating user contains \"{GROUP_SEPARATOR}\", "
                                      "which the creator record cannot hold; create it as another user'",
                 "reason": "Forbidden"},
                {"expression": f"request.operation != 'CREATE' || variables.policyRun || ({user} in variables.ann && {uid} in variables.ann && "
                               f"{groups} in variables.ann && variables.ann[{user}] == variables.username && "
                               f"variables.ann[{uid}] == variables.uid && variables.ann[{groups}] == variables.groups)",
                 "messageExpression": fix,
                 "reason": "Forbidden"},
                {"expression": "request.operation != 'UPDATE' || "
                               + _keys_unchanged(keys, "variables.ann", "variables.old"),
                 "messageExpression": "object.kind + ': the creator annotations (repack.volcano.sh/creator-*) cannot be "
                                      "added, changed or removed after creation'",
                 "reason": "Forbidden"},
                # SEC-2: the run-state mark is the controller's to set, change or remove
                {"expression": f"variables.username == {controller} || (request.operation == 'CREATE' ? "
                               f"!({state} in variables.ann) : "
                               + _keys_unchanged(f"[{state}]", "variables.ann", "variables.old") + ")",
                 "messageExpression": f"object.kind + ': annotation {RUN_STATE_ANNOTATION} is written by the "
                                      "repack controller only'",
                 "reason": "Forbidden"},
                # SEC-2: the records digest is the controller's (or a seal-key reader's on a local run)
                {"expression": f"request.operation == 'CREATE' ? !({digest} in variables.ann) : "
                               + _keys_unchanged(f"[{digest}]", "variables.ann", "variables.old")
                               + f" || variables.username == {controller} || ({executor} in variables.ann && "
                               f"variables.ann[{executor}] == {local} && {seal_reader})",
                 "messageExpression": f"object.kind + ': annotation {RECORDS_DIGEST_ANNOTATION} is written by the "
                                      "repack controller only (on a run executed with apply --local, by a user who "
                                      f"may get secret {namespace}/{SEAL_SECRET_NAME}); no run is created with it'",
                 "reason": "Forbidden"},
            ] + _policy_authority_rules(user, uid, groups, controller),
        },
    }


def _policy_authority_rules(user: str, uid: str, groups: str, controller: str) -> list:
    """Two more rules of creator_policy (SEC-1), about RepackPolicies and the runs they create:

    - what a policy does is its creator's to change: an UPDATE that changes any field of its spec
      but `suspend` (the template, triggers, windows, time zone, history limits, minWorkloadInterval)
      must come from the user its creator record names (username, uid and groups as recorded; the
      record itself never changes, rule above). Its runs are SubjectAccessReviewed as that user, so
      anybody else who may `update repackpolicies` could otherwise turn a DryRun into an Execute,
      or widen its scope, on the creator's authority. Suspending, resuming (`spec.suspend`) and
      triggering (an annotation) stay open to them: they choose when the creator's policy runs, not
      what it does. Whoever wants other runs creates their own policy, on their own authority.
    - the POLICY_LABEL is the controller's mark on the runs a policy created (the reconciler counts
      only those as the policy's: "never two unfinished runs", history limits): only the controller's
      account may create a run carrying it, nobody may add, change or remove it afterwards, and no
      ownerReference to a RepackPolicy may be added to a run after its creation.
    """
    from kubectl_repack.api.policy import POLICY_LABEL
    from kubectl_repack.policy_schema import policy_crd

    crd = policy_crd()
    spec_fields = sorted(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"])
    changed = " || ".join(f"has(object.spec.{f}) != has(oldObject.spec.{f}) || "
                          f"(has(object.spec.{f}) && object.spec.{f} != oldObject.spec.{f})"
                          for f in spec_fields if f != "suspend")
    is_creator = (f"{user} in variables.ann && {uid} in variables.ann && {groups} in variables.ann && "
                  f"variables.ann[{user}] == variables.username && variables.ann[{uid}] == variables.uid && "
                  f"variables.ann[{groups}] == variables.groups")
    label = _cel_string(POLICY_LABEL)
    new_labels = "(has(object.metadata.labels) ? object.metadata.labels : {})"
    old_labels = "(has(oldObject.metadata.labels) ? oldObject.metadata.labels : {})"
    new_refs = "(has(object.metadata.ownerReferences) ? object.metadata.ownerReferences : [])"
    old_refs = "(has(oldObject.metadata.ownerReferences) ? oldObject.metadata.ownerReferences : [])"
    return [
        {"expression": f"object.kind != 'RepackPolicy' || request.operation != 'UPDATE' || !({changed}) || {is_creator}",
         "messageExpression": "'RepackPolicy ' + object.metadata.name + ': only its creator (' + "
                              f"(({user} in variables.ann) ? variables.ann[{user}] : '<none>') + ', as recorded in "
                              f"the {CREATOR_USERNAME_ANNOTATION}/{CREATOR_UID_ANNOTATION}/{CREATOR_GROUPS_ANNOTATION} "
                              "annotations) may change its spec, because its runs act on the authority of its creator; "
                              "spec.suspend and the repack.volcano.sh/trigger annotation (kubectl repack policy "
                              "suspend/resume/trigger) are open to you. To run another template, create a policy of "
                              "your own (kubectl repack policy create)'",
         "reason": "Forbidden"},
        {"expression": f"object.kind != 'RepackRun' || (request.operation == 'CREATE' ? "
                       f"(!({label} in {new_labels}) || variables.username == {controller}) : "
                       f"({_keys_unchanged(f'[{label}]', new_labels, old_labels)} && "
                       f"{new_refs}.all(r, r.kind != 'RepackPolicy' || {old_refs}.exists(o, o.uid == r.uid))))",
         "messageExpression": f"'RepackRun ' + object.metadata.name + ': the label {POLICY_LABEL} and the ownerReference "
                              "to a RepackPolicy mark the runs a policy created; only the repack controller sets them, "
                              "when it creates the run, and they cannot be added or changed afterwards'",
         "reason": "Forbidden"},
    ]


def _binding(policy_name: str) -> Manifest:
    """Binds a policy of ours cluster-wide, named like it, with the Deny action."""
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": object_meta(policy_name), "spec": {"policyName": policy_name, "validationActions": ["Deny"]}}


def _keys_unchanged(keys: str, new: str, old: str) -> str:
    """CEL: none of the map keys in the CEL list `keys` was added, removed or changed from `old` to `new`."""
    return f"{keys}.all(k, (k in {new}) == (k in {old}) && (!(k in {new}) || {new}[k] == {old}[k]))"


def creator_policy_binding() -> Manifest:
    return _binding(CREATOR_POLICY_NAME)


def pod_write_policy(namespace: str) -> Manifest:
    """SEC-3: what the coordinator's and the controller's pod patches may change. Their RBAC has to
    allow `patch` on every pod (to lift the placement gate), and a pod's image, tolerations and
    labels are mutable (and, while any scheduling gate holds it, its nodeSelector and affinity):
    without this policy their token could run any code under any pod's ServiceAccount, or steer
    pods another controller gated. With it, the only pod changes these two identities can make are
    removing the placement gate and writing `repack.volcano.sh/` annotations."""
    from kubectl_repack.api.gates import PLACEMENT_GATE

    users = [f"system:serviceaccount:{namespace}:{n}" for n in (COORDINATOR_NAME, CONTROLLER_NAME)]
    from planner.model import DO_NOT_DISRUPT

    gate = _cel_string(PLACEMENT_GATE)
    prefix = _cel_string("repack.volcano.sh/")
    opt_out = _cel_string(DO_NOT_DISRUPT)      # the owner's opt-out is theirs: neither account may touch it

    def same(path: str, empty: str = "[]", of: str = "") -> str:
        new_value, old_value = (f"(has({o}.{path}) ? {o}.{path}{of} : {empty})" for o in ("object", "oldObject"))
        return f"{new_value} == {old_value}"

    unchanged = [("spec.containers images", same("spec.containers", of=".map(c, c.image)")),
            ("spec.initContainers images", same("spec.initContainers", of=".map(c, c.image)")),
            ("spec.tolerations", same("spec.tolerations")),
            ("spec.activeDeadlineSeconds", same("spec.activeDeadlineSeconds", "0")),
            ("metadata.labels", same("metadata.labels", "{}")),
            # a gated pod's nodeSelector and affinity are mutable (Kubernetes' mutable scheduling
            # directives): neither account writes them, so neither may steer anybody's gated pod
            ("spec.nodeSelector", same("spec.nodeSelector", "{}")),
            ("spec.affinity", same("spec.affinity", "{}")),
            ("metadata.ownerReferences", same("metadata.ownerReferences")),
            ("metadata.finalizers", same("metadata.finalizers"))]
    validations = [{"expression": expr, "message": f"{COORDINATOR_NAME}/{CONTROLLER_NAME} may not change a pod's {what}",
                    "reason": "Forbidden"} for what, expr in unchanged]
    validations += [
        {"expression": "variables.newGates.all(g, variables.oldGates.exists(o, o.name == g.name)) && "
                       f"variables.oldGates.all(o, o.name == {gate} || variables.newGates.exists(g, g.name == o.name))",
         "message": f"{COORDINATOR_NAME}/{CONTROLLER_NAME} may only remove the {PLACEMENT_GATE} scheduling gate",
         "reason": "Forbidden"},
        {"expression": f"variables.newAnn.all(k, (k.startsWith({prefix}) && k != {opt_out}) || (k in variables.oldAnn && "
                       "variables.oldAnn[k] == variables.newAnn[k])) && "
                       f"variables.oldAnn.all(k, (k.startsWith({prefix}) && k != {opt_out}) || k in variables.newAnn)",
         "message": f"{COORDINATOR_NAME}/{CONTROLLER_NAME} may only write repack.volcano.sh/ annotations "
                    f"(not {DO_NOT_DISRUPT})",
         "reason": "Forbidden"},
    ]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": object_meta(POD_WRITE_POLICY_NAME),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                                                    "resources": ["pods"]}]},
            "matchConditions": [{"name": "repack-processes",
                                 "expression": f"request.userInfo.username in [{', '.join(map(_cel_string, users))}]"}],
            "variables": [
                {"name": "newGates", "expression": "has(object.spec.schedulingGates) ? object.spec.schedulingGates : []"},
                {"name": "oldGates",
                 "expression": "has(oldObject.spec.schedulingGates) ? oldObject.spec.schedulingGates : []"},
                {"name": "newAnn", "expression": "has(object.metadata.annotations) ? object.metadata.annotations : {}"},
                {"name": "oldAnn",
                 "expression": "has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}"},
            ],
            "validations": validations,
        },
    }


def pod_write_policy_binding() -> Manifest:
    return _binding(POD_WRITE_POLICY_NAME)


def replacement_pod_policy(namespace: str, creators: Optional[list] = None) -> Manifest:
    """SEC-5: who may mark a pod as a repack replacement. A pod that carries the repack relocation
    annotations or the placement gate when it is created must be created by a workload controller
    that re-creates evicted pods (`creators`; the webhook adds the marks during exactly those
    requests); afterwards only the coordinator and the controller may change the marks. Cluster
    admins (system:masters) are not checked: `uninstall` lifts leftover gates as one."""
    from kubectl_repack.api.gates import DEFAULT_REPLACEMENT_CREATORS, PLACEMENT_GATE, REPLACEMENT_MARKS, TARGET_MARKS

    creators = list(creators or DEFAULT_REPLACEMENT_CREATORS)
    ours = [f"system:serviceaccount:{namespace}:{n}" for n in (COORDINATOR_NAME, CONTROLLER_NAME)]
    # the target marks (RELIEF-3) too: written by the coordinator only, read back by the executor
    marks = "[" + ", ".join(map(_cel_string, REPLACEMENT_MARKS + TARGET_MARKS)) + "]"
    cel_list = lambda names: "[" + ", ".join(map(_cel_string, names)) + "]"   # noqa: E731
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": object_meta(REPLACEMENT_POD_POLICY_NAME),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                    "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}]},
            "matchConditions": [{"name": "not-a-cluster-admin", "expression":
                                 "!('system:masters' in (has(request.userInfo.groups) ? request.userInfo.groups : []))"}],
            "variables": [
                {"name": "newAnn", "expression": "has(object.metadata.annotations) ? object.metadata.annotations : {}"},
                {"name": "oldAnn", "expression": "request.operation == 'UPDATE' && has(oldObject.metadata.annotations)"
                                                 " ? oldObject.metadata.annotations : {}"},
                {"name": "username", "expression": "has(request.userInfo.username) ? request.userInfo.username : ''"},
            ],
            "validations": [
                {"expression": f"request.operation != 'CREATE' || variables.username in {cel_list(creators)} || "
                               f"(!{marks}.exists(k, k in variables.newAnn) && !(has(object.spec.schedulingGates) && "
                               f"object.spec.schedulingGates.exists(g, g.name == {_cel_string(PLACEMENT_GATE)})))",
                 "messageExpression": "'pod: ' + variables.username + ' may not create a pod carrying the repack.volcano.sh "
                                      "relocation annotations or placement gate: only the workload controllers that "
                                      "re-create evicted pods may (kubectl repack install --replacement-creator)'",
                 "reason": "Forbidden"},
                {"expression": f"request.operation != 'UPDATE' || variables.username in {cel_list(ours)} || "
                               + _keys_unchanged(marks, "variables.newAnn", "variables.oldAnn"),
                 "message": "pod: the repack.volcano.sh relocation annotations are written by the repack webhook at "
                            "creation and changed by its coordinator and controller only",
                 "reason": "Forbidden"},
            ],
        },
    }


def replacement_pod_policy_binding() -> Manifest:
    return _binding(REPLACEMENT_POD_POLICY_NAME)


# The pod status fields of every Kubernetes version with ValidatingAdmissionPolicy v1 (1.30) besides
# nominatedNodeName: a field the API server's schema lacks would not compile, and with failurePolicy
# Fail that would refuse every nomination.
POD_STATUS_FIELDS = ("phase", "conditions", "message", "reason", "hostIP", "hostIPs", "podIP", "podIPs", "startTime",
                     "initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses", "qosClass", "resize",
                     "resourceClaimStatuses")


def nomination_policy(namespace: str) -> Manifest:
    """SEC-3, RELIEF-3: what the coordinator may write through `pods/status` (its RBAC allows `patch`
    there on every pod, and pod_write_policy matches `pods` only, not the subresource). A status
    write can change labels, annotations and every status field (podIP, the Ready condition: what
    Services route to), so this policy allows exactly one change, status.nominatedNodeName, and
    only to the node the pod's own marks name:

    - a gated replacement: the pod still carries the placement gate (which only the webhook adds, at
      creation by a replacement creator, SEC-5; gates cannot be added later) and the relocation run
      annotation, and the hint is its `repack.volcano.sh/planned-node`;
    - a target pod of a run: unbound, Pending, in a PodGroup, marked `repack.volcano.sh/target-of`
      (the run) and `repack.volcano.sh/target-node`, and the hint is that node.

    Spec, labels, annotations, owner references, finalizers and every other status field must stay
    as they were (compared field by field: POD_STATUS_FIELDS); clearing or changing another's hint
    is refused. failurePolicy Fail. Residual risk, stated: the coordinator writes the target marks
    itself (pod_write_policy lets it write repack.volcano.sh/ annotations), so a stolen coordinator
    token can mark any pending pod of a PodGroup and hint it to any node. A hint is not a binding:
    the scheduler still runs every filter, and the worst it does is steer such a pod (or, for
    kube-scheduler, make lower-priority pods avoid that node for a while). Status fields newer than
    Kubernetes 1.30 (observedGeneration, extendedResourceClaimStatus) are not compared."""
    from kubectl_repack.api.gates import (PLACEMENT_GATE, PLANNED_NODE_ANNOTATION, RELOCATION_RUN_ANNOTATION,
                                          TARGET_NODE_ANNOTATION, TARGET_RUN_ANNOTATION)
    from planner.model import GROUP_ANNOTATIONS, GROUP_LABEL

    user = _cel_string(f"system:serviceaccount:{namespace}:{COORDINATOR_NAME}")
    run_ann, planned = _cel_string(RELOCATION_RUN_ANNOTATION), _cel_string(PLANNED_NODE_ANNOTATION)
    target_run, target_node = _cel_string(TARGET_RUN_ANNOTATION), _cel_string(TARGET_NODE_ANNOTATION)
    groups = "[" + ", ".join(map(_cel_string, GROUP_ANNOTATIONS)) + "]"

    def same(path: str, empty: str) -> str:
        new_value, old_value = (f"(has({o}.{path}) ? {o}.{path} : {empty})" for o in ("object", "oldObject"))
        return f"{new_value} == {old_value}"

    def same_field(name: str) -> str:
        return (f"has(object.status.{name}) == has(oldObject.status.{name}) && "
                f"(!has(object.status.{name}) || object.status.{name} == oldObject.status.{name})")

    who = f"{COORDINATOR_NAME} (pods/status)"
    unchanged = [("spec", "object.spec == oldObject.spec"),
                 ("metadata.labels", same("metadata.labels", "{}")),
                 ("metadata.annotations", "variables.newAnn == variables.oldAnn"),
                 ("metadata.ownerReferences", same("metadata.ownerReferences", "[]")),
                 ("metadata.finalizers", same("metadata.finalizers", "[]")),
                 ("status (other than nominatedNodeName)", " && ".join(same_field(f) for f in POD_STATUS_FIELDS))]
    validations = [{"expression": expr, "message": f"{who} may not change a pod's {what}", "reason": "Forbidden"}
                   for what, expr in unchanged]
    validations.append({
        "expression": "variables.node == variables.oldNode || variables.replacement || variables.target",
        "messageExpression": (f"'{who} may set status.nominatedNodeName only to the planned node of a gated "
                              f"replacement ({PLANNED_NODE_ANNOTATION}) or to the node a target pod is marked "
                              f"for ({TARGET_NODE_ANNOTATION}), not to ' + variables.node"),
        "reason": "Forbidden"})
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": object_meta(NOMINATION_POLICY_NAME),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                                                    "resources": ["pods/status"]}]},
            "matchConditions": [{"name": "repack-coordinator", "expression": f"request.userInfo.username == {user}"}],
            "variables": [
                {"name": "newAnn", "expression": "has(object.metadata.annotations) ? object.metadata.annotations : {}"},
                {"name": "oldAnn",
                 "expression": "has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}"},
                {"name": "node",
                 "expression": "has(object.status.nominatedNodeName) ? object.status.nominatedNodeName : ''"},
                {"name": "oldNode",
                 "expression": "has(oldObject.status.nominatedNodeName) ? oldObject.status.nominatedNodeName : ''"},
                {"name": "unbound", "expression": "!has(oldObject.spec.nodeName) || oldObject.spec.nodeName == ''"},
                {"name": "replacement",
                 "expression": f"variables.node != '' && has(oldObject.spec.schedulingGates) && "
                               f"oldObject.spec.schedulingGates.exists(g, g.name == {_cel_string(PLACEMENT_GATE)}) && "
                               f"{run_ann} in variables.oldAnn && {planned} in variables.oldAnn && "
                               f"variables.node == variables.oldAnn[{planned}]"},
                {"name": "target",
                 "expression": f"variables.node != '' && variables.unbound && has(oldObject.status.phase) && "
                               f"oldObject.status.phase == 'Pending' && {target_run} in variables.oldAnn && "
                               f"variables.oldAnn[{target_run}] != '' && {target_node} in variables.oldAnn && "
                               f"variables.node == variables.oldAnn[{target_node}] && "
                               f"({groups}.exists(k, k in variables.oldAnn && variables.oldAnn[k] != '') || "
                               f"(has(oldObject.metadata.labels) && {_cel_string(GROUP_LABEL)} in oldObject.metadata.labels))"},
            ],
            "validations": validations,
        },
    }


def nomination_policy_binding() -> Manifest:
    return _binding(NOMINATION_POLICY_NAME)


# Two policies on what a stolen token of an in-cluster process could otherwise rewrite (SEC-3).
# CONTROLLER_WRITES_POLICY_NAME, RUN_STATUS_POLICY_NAME: kubectl_repack.api.control (doctor checks them too)


def _only_keys_differ(new: str, old: str, keys: list) -> str:
    """CEL: the maps `new` and `old` (objects are maps at admission) are equal but for `keys`."""
    allowed = "[" + ", ".join(map(_cel_string, keys)) + "]"
    return (f"{new}.all(k, k in {allowed} || (k in {old} && {new}[k] == {old}[k])) && "
            f"{old}.all(k, k in {allowed} || k in {new})")


def _same_meta(what: str) -> list:
    """Validations: labels, annotations, ownerReferences and finalizers of the object unchanged."""
    return [{"expression": f"(has(object.metadata.{f}) ? object.metadata.{f} : {empty}) == "
                           f"(has(oldObject.metadata.{f}) ? oldObject.metadata.{f} : {empty})",
             "message": f"{what} may not change metadata.{f}", "reason": "Forbidden"}
            for f, empty in (("labels", "{}"), ("annotations", "{}"), ("ownerReferences", "[]"),
                             ("finalizers", "[]"))]


def controller_write_policy(namespace: str) -> Manifest:
    """SEC-3: the two writes outside RepackRuns and pods the controller's account holds, confined
    to what webhook.controller.certmanager does with them, so that its token cannot take over
    admission:

    - the MutatingWebhookConfiguration `repack-placement`: only the `clientConfig.caBundle` of its
      webhooks may change (never a URL, a Service, the rules, selectors, failure policy, a webhook
      added or removed, nor its metadata);
    - the webhook's Deployment: only the `repack.volcano.sh/tls-fingerprint` annotation of its pod
      template may change (what rolls the pod after a certificate rotation), never its image,
      command, ServiceAccount, volumes, replicas or anything else.

    failurePolicy Fail. Residual risk, stated: the token can still set a caBundle no serving
    certificate matches (the API server then calls the webhook fail-open: pods are admitted
    unmutated, repack's placement is off) and roll the webhook's pod."""
    from .controller import TLS_FINGERPRINT_ANNOTATION

    user = _cel_string(f"system:serviceaccount:{namespace}:{CONTROLLER_NAME}")
    who = CONTROLLER_NAME
    config = "request.resource.resource != 'mutatingwebhookconfigurations' || "
    deploy = "request.resource.resource != 'deployments' || "
    hooks, old_hooks = (f"(has({o}.webhooks) ? {o}.webhooks : [])" for o in ("object", "oldObject"))
    same_hook = (f"{old_hooks}.exists(o, o.name == w.name && {_only_keys_differ('w', 'o', ['clientConfig'])} && "
                 f"{_only_keys_differ('w.clientConfig', 'o.clientConfig', ['caBundle'])})")
    template = "object.spec.template", "oldObject.spec.template"
    ann = tuple(f"(has({t}.metadata.annotations) ? {t}.metadata.annotations : {{}})" for t in template)
    validations = [{**v, "expression": prefix + v["expression"]}
                   for prefix in (config, deploy) for v in _same_meta(who)]
    validations += [
        {"expression": config + f"{hooks}.size() == {old_hooks}.size() && {hooks}.all(w, {same_hook})",
         "message": f"{who} may change only the clientConfig.caBundle of a webhook configuration's webhooks",
         "reason": "Forbidden"},
        {"expression": deploy + _only_keys_differ("object.spec", "oldObject.spec", ["template"]) + " && "
                       + _only_keys_differ(template[0], template[1], ["metadata"]) + " && "
                       + _only_keys_differ(f"(has({template[0]}.metadata) ? {template[0]}.metadata : {{}})",
                                           f"(has({template[1]}.metadata) ? {template[1]}.metadata : {{}})",
                                           ["annotations"]) + " && "
                       + _only_keys_differ(ann[0], ann[1], [TLS_FINGERPRINT_ANNOTATION]),
         "message": f"{who} may change only the {TLS_FINGERPRINT_ANNOTATION} annotation of a Deployment's pod template",
         "reason": "Forbidden"},
    ]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": object_meta(CONTROLLER_WRITES_POLICY_NAME),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [
                {"apiGroups": ["admissionregistration.k8s.io"], "apiVersions": ["v1"], "operations": ["UPDATE"],
                 "resources": ["mutatingwebhookconfigurations"]},
                {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["deployments"]}]},
            "matchConditions": [{"name": "repack-controller", "expression": f"request.userInfo.username == {user}"}],
            "validations": validations,
        },
    }


def controller_write_policy_binding() -> Manifest:
    return _binding(CONTROLLER_WRITES_POLICY_NAME)


def run_status_policy(namespace: str) -> Manifest:
    """SEC-3: what the coordinator may write through `repackruns/status` (its RBAC allows
    `update` there on every run, RepackRuns being cluster-scoped): the placement of relocation
    records it tracks (`placement` and `replacementPodGroupName` of each record, what
    api.run.write_placement_fields sets), nothing else: no record added, removed or reordered, none
    of the controller's fields (phase, conditions, plan, result, deadlines, each record's victim,
    planned node and eviction) changed. The field lists come from the RepackRun CRD's schema, which
    prunes every other field. failurePolicy Fail."""
    from kubectl_repack.schema import load_crd

    user = _cel_string(f"system:serviceaccount:{namespace}:{COORDINATOR_NAME}")
    status = load_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    placement = ("placement", "replacementPodGroupName")
    record_fields = [f for f in status["relocations"]["items"]["properties"] if f not in placement]
    top = [f for f in status if f != "relocations"]

    def same_field(path: str) -> str:
        return (f"has(object.status.{path}) == has(oldObject.status.{path}) && "
                f"(!has(object.status.{path}) || object.status.{path} == oldObject.status.{path})")

    def canon(records: str) -> str:
        return f"{records}.map(r, [{', '.join(f'(has(r.{f}) ? [r.{f}] : [])' for f in record_fields)}])"

    relocations = ("(has(object.status.relocations) ? object.status.relocations : [])",
                   "(has(oldObject.status.relocations) ? oldObject.status.relocations : [])")
    who = f"{COORDINATOR_NAME} (repackruns/status)"
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": object_meta(RUN_STATUS_POLICY_NAME),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["repack.volcano.sh"], "apiVersions": ["*"],
                                                    "operations": ["UPDATE"], "resources": ["repackruns/status"]}]},
            "matchConditions": [{"name": "repack-coordinator", "expression": f"request.userInfo.username == {user}"}],
            "validations": [
                {"expression": "has(object.status) == has(oldObject.status) && (!has(object.status) || ("
                               + " && ".join(same_field(f) for f in top) + "))",
                 "message": f"{who} may not change a run's status other than its relocation records' placement",
                 "reason": "Forbidden"},
                {"expression": f"!has(object.status) || {canon(relocations[0])} == {canon(relocations[1])}",
                 "message": f"{who} may change only the placement and replacementPodGroupName of a run's relocation "
                            "records: none added, removed or reordered, no victim, planned node or eviction changed",
                 "reason": "Forbidden"},
            ],
        },
    }


def run_status_policy_binding() -> Manifest:
    return _binding(RUN_STATUS_POLICY_NAME)
