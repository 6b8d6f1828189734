"""`kubectl repack apply --for KIND/NAME -n NS` (RELIEF-2) and the check that the installed CRD
keeps spec.target (else the API server prunes it and the run executes untargeted), on a fake cluster."""
import json

import pytest

from kubectl_repack import errors, schema
from kubectl_repack.kube import preflight
from kubectl_repack.kube.preflight import Check
from tests.unit.cli.conftest import GUARDED, flatten, run
from tests.unit.planner.test_relief import seed

NOT_SERVED = ("error: spec.target: the RepackRun CRD installed in this cluster has no spec.target (an older "
              "kubectl-repack install or the Go implementation's CRD, which would drop it and run an "
              "untargeted Execute): run kubectl repack install to upgrade it")


def old_crd():
    """The bundled CRD with spec.target removed from every version's schema (an older install)."""
    crd = schema.load_crd()
    for v in crd["spec"]["versions"]:
        del v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["target"]
    return crd


@pytest.fixture
def cluster(fake_cluster, monkeypatch):
    """The relief seed (default/large-pg waits, node-01 can be vacated for it), a running
    controller, and the CRD this plugin bundles (tests swap it through cluster["crd"])."""
    fake_cluster["objects"] = flatten(seed())
    fake_cluster["crd"] = schema.load_crd()

    class FakePreflight:
        def __init__(self, api, namespace=None, *args, **kwargs):
            pass

        def controller(self):
            return Check("controller", True, "held")

        def webhook(self):
            return Check("webhook", True, "present")

    def installed_crd(api):
        crd = fake_cluster["crd"]
        if isinstance(crd, Exception):
            raise crd
        return crd

    monkeypatch.setattr(preflight, "Preflight", FakePreflight)
    monkeypatch.setattr(preflight, "installed_crd", installed_crd)
    return fake_cluster


def creates(cluster):
    return [c for c in cluster["store"].calls if c[0] == "create"]


def test_apply_for_resolves_the_gang_and_sends_spec_target(cluster):
    r = run("apply", "--for", "podgroup/large-pg", "-n", "default", "--name", "make-room", "--no-wait", "-o", "json")
    assert r.exit_code == 4, r.output          # created, not followed
    stored = cluster["store"].runs["make-room"]
    assert stored["spec"]["target"] == {"podGroups": ["default/large-pg"]}
    assert stored["spec"]["mode"] == "Execute" and "goals" not in stored["spec"]
    assert json.loads(r.stdout)["spec"]["target"] == {"podGroups": ["default/large-pg"]}
    assert "freed" in r.stderr or "node-01" in r.stderr   # the plan to expect was shown first


def test_apply_for_a_vcjob_names_its_podgroup(cluster):
    # the seed's gangs are PodGroups only; a pod of the gang resolves to it as well
    r = run("apply", "--for", "pod/large-worker-0", "-n", "default", "--name", "by-pod", "--no-wait", "-o", "json")
    assert r.exit_code == 4, r.output
    assert cluster["store"].runs["by-pod"]["spec"]["target"] == {"podGroups": ["default/large-pg"]}


def test_an_old_crd_refuses_the_targeted_run_and_sends_nothing(cluster):
    cluster["crd"] = old_crd()
    r = run("apply", "--for", "podgroup/large-pg", "-n", "default", "--name", "make-room")
    assert r.exit_code == 2, r.output
    assert NOT_SERVED in r.stderr
    assert creates(cluster) == [] and cluster["store"].runs == {}


def test_an_old_crd_refuses_a_run_file_with_spec_target(cluster, tmp_path):
    cluster["crd"] = old_crd()
    f = tmp_path / "run.yaml"
    f.write_text(json.dumps({"apiVersion": schema.API_VERSION, "kind": schema.KIND, "metadata": {"name": "t"},
                             "spec": {"mode": "Execute", "target": {"podGroups": ["default/large-pg"]}}}))
    for local in ([], ["--local"]):
        r = run("apply", "-f", f, *local)
        assert r.exit_code == 2, r.output
        assert NOT_SERVED in r.stderr
    assert creates(cluster) == []


def test_an_untargeted_run_is_not_held_to_the_check(cluster):
    cluster["crd"] = old_crd()
    r = run("apply", "-f", GUARDED, "--mode", "Execute", "--name", "plain", "--no-wait", "-o", "json")
    assert r.exit_code in (3, 4), r.output    # whatever the plan says: not refused for spec.target
    assert NOT_SERVED not in r.stderr


def test_plan_save_is_held_to_the_check(cluster):
    cluster["crd"] = old_crd()
    r = run("plan", "--for", "podgroup/large-pg", "-n", "default", "--save")
    assert r.exit_code == 2 and NOT_SERVED in r.stderr, r.output
    assert creates(cluster) == []
    cluster["crd"] = schema.load_crd()
    r = run("plan", "--for", "podgroup/large-pg", "-n", "default", "--save", "--name", "saved", "-o", "json")
    assert r.exit_code == 0, r.output
    assert cluster["store"].runs["saved"]["spec"]["target"] == {"podGroups": ["default/large-pg"]}


def test_without_the_right_to_read_crds_a_server_dry_run_decides(cluster, monkeypatch):
    cluster["crd"] = errors.ClusterAPIError("reading customresourcedefinitions: forbidden (HTTP 403)", 403)
    store = cluster["store"]
    dry = []

    def create(obj, dry_run=False):
        if dry_run:   # as an API server with the old CRD answers: spec.target pruned, nothing stored
            dry.append(obj["metadata"]["name"])
            return {k: v for k, v in obj.items()} | {"spec": {k: v for k, v in obj["spec"].items() if k != "target"}}
        raise AssertionError("created for real")

    monkeypatch.setattr(store, "create", create)
    r = run("apply", "--for", "podgroup/large-pg", "-n", "default", "--name", "make-room")
    assert r.exit_code == 2 and NOT_SERVED in r.stderr, r.output
    assert dry == ["make-room"]


@pytest.mark.parametrize("ref,says", [("podgroup/nope", "error: podgroup default/nope: not found"),
                                      ("podgroup/batch-pg", "is not waiting")])
def test_an_unknown_or_running_target_exits_2_naming_it(cluster, ref, says):
    r = run("apply", "--for", ref, "-n", "default")
    assert r.exit_code == 2, r.output
    assert says in r.stderr and ref.partition("/")[2] in r.stderr
    assert creates(cluster) == []


def test_for_and_a_file_with_a_target_or_resume_are_usage_errors(cluster, tmp_path):
    r = run("apply", "--for", "podgroup/large-pg", "--resume", "x")
    assert r.exit_code == 2 and "--resume" in r.stderr
    r = run("apply", "-n", "default", "--resume", "x")
    assert r.exit_code == 2 and "namespace of the --for object" in r.stderr
