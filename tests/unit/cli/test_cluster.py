"""The kube I/O layer (kubectl_repack.kube) without a server: paging, missing CRDs, expired lists, error mapping,
status writes with conflicts, kubeconfig loading."""
import json

import pytest
from kubernetes.client.rest import ApiException

from kubectl_repack.kube import client as kclient
from kubectl_repack.kube import objects as kobjects
from kubectl_repack.kube import runs as kruns
from kubectl_repack.kube.client import connect as real_connect
from kubectl_repack.errors import ClusterAPIError, Conflict, NotFound, RepackError, TooManyRequests

NODE = kobjects.Kind("v1", "Node", "nodes")
PG = kobjects.Kind("scheduling.volcano.sh/v1beta1", "PodGroup", "podgroups", optional=True)


def api_exception(status, message="boom", reason="Reason"):
    e = ApiException(status=status, reason=reason)
    e.body = json.dumps({"kind": "Status", "message": message, "code": status})
    return e


class Pages:
    """A fake `_list_page`: serves pages, records (kind, limit, token) of every call."""

    def __init__(self, script):
        self.script = list(script)
        self.calls = []

    def __call__(self, api, kind, limit, token):
        self.calls.append((kind.plural, limit, token))
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return step


def page(names, token=None, item_kind=None):
    items = []
    for n in names:
        item = {"metadata": {"name": n, "managedFields": [{"manager": "kubelet"}]}, "status": {}}
        if item_kind:
            item = {"apiVersion": "x/v1", "kind": item_kind, **item}
        items.append(item)
    return {"kind": "NodeList", "apiVersion": "v1", "metadata": {"continue": token} if token else {},
            "items": items}


def test_lists_every_page_with_limit_and_continue(monkeypatch):
    pages = Pages([page(["a", "b"], "t1"), page(["c"], "t2"), page(["d"])])
    monkeypatch.setattr(kobjects, "_list_page", pages)
    items = kobjects.list_objects("api", NODE, page_size=2)
    assert [o["metadata"]["name"] for o in items] == ["a", "b", "c", "d"]
    assert pages.calls == [("nodes", 2, None), ("nodes", 2, "t1"), ("nodes", 2, "t2")]


def test_items_get_apiversion_and_kind_and_lose_managed_fields(monkeypatch):
    monkeypatch.setattr(kobjects, "_list_page", Pages([page(["a"])]))
    (item,) = kobjects.list_objects("api", NODE)
    assert list(item)[:2] == ["apiVersion", "kind"]
    assert (item["apiVersion"], item["kind"]) == ("v1", "Node")
    assert item["metadata"] == {"name": "a"}


def test_items_that_carry_their_kind_keep_it(monkeypatch):
    monkeypatch.setattr(kobjects, "_list_page", Pages([page(["a"], item_kind="Thing")]))
    (item,) = kobjects.list_objects("api", PG)
    assert (item["apiVersion"], item["kind"]) == ("x/v1", "Thing")


def test_a_missing_optional_crd_lists_as_empty(monkeypatch):
    monkeypatch.setattr(kobjects, "_list_page", Pages([kclient.api_error(api_exception(404), "listing")]))
    assert kobjects.list_objects("api", PG) == []


def test_a_missing_core_kind_is_an_error(monkeypatch):
    monkeypatch.setattr(kobjects, "_list_page", Pages([kclient.api_error(api_exception(404), "listing")]))
    with pytest.raises(NotFound):
        kobjects.list_objects("api", NODE)


def test_an_expired_continue_token_restarts_the_list(monkeypatch):
    expired = kclient.api_error(api_exception(410, "The provided continue parameter is too old"), "listing")
    pages = Pages([page(["a"], "t1"), expired, page(["a"], "t9"), page(["b"])])
    monkeypatch.setattr(kobjects, "_list_page", pages)
    assert [o["metadata"]["name"] for o in kobjects.list_objects("api", NODE)] == ["a", "b"]
    assert [c[2] for c in pages.calls] == [None, "t1", None, "t9"]


def test_read_snapshot_lists_every_kind_in_order(monkeypatch):
    seen = []

    def fake(api, kind, page_size=kobjects.PAGE_SIZE):
        seen.append(kind.plural)
        return [{"apiVersion": kind.api_version, "kind": kind.kind, "metadata": {"name": kind.plural}}]
    monkeypatch.setattr(kobjects, "list_objects", fake)
    objs = kobjects.read_snapshot("api")
    assert seen == ["namespaces", "nodes", "persistentvolumes", "persistentvolumeclaims", "pods",
                    "poddisruptionbudgets", "podgroups", "jobs", "modelservings", "hypernodes", "queues"]
    assert [o["kind"] for o in objs] == ["Namespace", "Node", "PersistentVolume", "PersistentVolumeClaim", "Pod",
                                         "PodDisruptionBudget", "PodGroup", "Job", "ModelServing", "HyperNode", "Queue"]
    assert {k.plural for k in kobjects.SNAPSHOT_KINDS if k.optional} == {"podgroups", "jobs", "modelservings",
                                                                         "hypernodes", "queues"}
    # only the queues (which `why` reads and no plan needs) may be unreadable
    assert {k.plural for k in kobjects.SNAPSHOT_KINDS if k.forbidden_ok} == {"queues"}
    hypernode = next(k for k in kobjects.SNAPSHOT_KINDS if k.kind == "HyperNode")
    assert hypernode.path() == hypernode.path("ns") == "/apis/topology.volcano.sh/v1alpha1/hypernodes"   # cluster-scoped


def test_a_kind_only_why_reads_is_empty_when_forbidden_and_others_are_errors(monkeypatch):
    def forbidden(*a, **kw):
        raise ClusterAPIError("listing: forbidden (HTTP 403)", status=403)
    monkeypatch.setattr(kobjects, "call", forbidden)
    queue = next(k for k in kobjects.SNAPSHOT_KINDS if k.kind == "Queue")
    assert kobjects.list_objects("api", queue) == []
    hypernode = next(k for k in kobjects.SNAPSHOT_KINDS if k.kind == "HyperNode")
    with pytest.raises(ClusterAPIError):
        kobjects.list_objects("api", hypernode)


@pytest.mark.parametrize("status, cls", [(404, NotFound), (409, Conflict), (429, TooManyRequests),
                                         (403, ClusterAPIError), (500, ClusterAPIError)])
def test_api_errors_map_to_the_error_tree(status, cls):
    err = kclient.api_error(api_exception(status, 'repackruns "x" is forbidden'), "reading repackrun x")
    assert type(err) is cls
    assert err.status == status
    assert str(err) == f'reading repackrun x: repackruns "x" is forbidden (HTTP {status})'


def test_unreachable_server_is_a_cluster_error():
    err = kclient.api_error(ApiException(status=0, reason="Connection refused"), "listing nodes")
    assert type(err) is ClusterAPIError
    assert str(err) == "listing nodes: cannot reach the API server: Connection refused"


def test_call_raises_from_the_cause():
    cause = api_exception(404, "not there")

    def fails():
        raise cause
    with pytest.raises(NotFound) as exc:
        kclient.call("reading repackrun x", fails)
    assert exc.value.__cause__ is cause


def test_connection_errors_are_cluster_errors():
    from urllib3.exceptions import MaxRetryError

    def fails():
        raise MaxRetryError(None, "https://127.0.0.1:1/api", "Connection refused")
    with pytest.raises(ClusterAPIError) as exc:
        kclient.call("listing nodes.core", fails)
    assert str(exc.value).startswith("listing nodes.core: cannot reach the API server:")


class FakeCustom:
    """CustomObjectsApi stand-in for RunStore: get, create, replace status with conflicts."""

    def __init__(self, conflicts=0):
        self.obj = None
        self.conflicts = conflicts
        self.writes = []

    def create_cluster_custom_object(self, group, version, plural, body, **kw):
        if self.obj is not None:
            raise api_exception(409, f'repackruns.repack.volcano.sh "{body["metadata"]["name"]}" already exists')
        assert "status" not in body
        self.obj = dict(body, metadata=dict(body["metadata"], resourceVersion="1"))
        return json.loads(json.dumps(self.obj))

    def get_cluster_custom_object(self, group, version, plural, name, **kw):
        return json.loads(json.dumps(self.obj))

    def replace_cluster_custom_object_status(self, group, version, plural, name, body, **kw):
        self.writes.append(body["metadata"]["resourceVersion"])
        if self.conflicts:
            self.conflicts -= 1
            self.obj["metadata"]["resourceVersion"] = str(int(self.obj["metadata"]["resourceVersion"]) + 1)
            self.obj["status"] = {"relocations": [{"victimPodName": "kept"}]}  # the other writer
            raise api_exception(409, "the object has been modified")
        self.obj = json.loads(json.dumps(body))
        return json.loads(json.dumps(self.obj))


def store_with(custom, me=None):
    from kubectl_repack.api.control import Creator

    store = kruns.RunStore.__new__(kruns.RunStore)
    store.api, store.custom = "api", custom
    store.whoami = lambda: me or Creator("tester", "uid-t", ("system:authenticated",))
    return store


RUN = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": "r"},
       "spec": {"mode": "DryRun"}, "status": {"phase": "Succeeded"}}


def test_create_sends_no_status_and_status_goes_through_the_subresource():
    custom = FakeCustom()
    store = store_with(custom)
    store.create(RUN)
    out = store.write_status("r", {"phase": "Succeeded"})
    assert out["status"] == {"phase": "Succeeded"}
    assert custom.writes == ["1"]


def test_create_records_the_caller_as_creator_unless_the_run_names_one():
    from kubectl_repack.api.control import CREATOR_USERNAME_ANNOTATION, Creator

    custom = FakeCustom()
    store_with(custom, Creator("alice", "u-a", ("team-a", "system:authenticated"))).create(RUN)
    assert custom.obj["metadata"]["annotations"] == Creator("alice", "u-a", ("team-a", "system:authenticated")).annotations()
    assert "annotations" not in RUN["metadata"]            # the caller's object is not changed
    custom = FakeCustom()
    named = dict(RUN, metadata={"name": "r", "annotations": {CREATOR_USERNAME_ANNOTATION: "bob"}})
    store_with(custom).create(named)
    assert custom.obj["metadata"]["annotations"] == {CREATOR_USERNAME_ANNOTATION: "bob"}   # the policy judges it


def test_status_write_retries_on_conflict_and_keeps_the_other_writers_fields():
    custom = FakeCustom(conflicts=2)
    store = store_with(custom)
    store.create(RUN)
    out = store.write_status("r", {"phase": "Succeeded"})
    assert custom.writes == ["1", "2", "3"]
    assert out["status"] == {"relocations": [{"victimPodName": "kept"}], "phase": "Succeeded"}


def test_status_write_gives_up_after_repeated_conflicts():
    custom = FakeCustom(conflicts=99)
    store = store_with(custom)
    store.create(RUN)
    with pytest.raises(Conflict):
        store.write_status("r", {"phase": "Succeeded"})
    assert len(custom.writes) == kclient.CONFLICT_RETRIES


def test_creating_an_existing_run_names_it():
    store = store_with(FakeCustom())
    store.create(RUN)
    with pytest.raises(Conflict) as exc:
        store.create(RUN)
    assert str(exc.value).startswith("repackrun r already exists; choose another name (--name) or delete it")


def test_connect_to_a_missing_kubeconfig_names_the_file(tmp_path):
    with pytest.raises(RepackError) as exc:
        real_connect(str(tmp_path / "nope"))
    assert str(exc.value) == f"kubeconfig {tmp_path / 'nope'}: no such file"


KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: abc}
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
"""


def test_connect_uses_the_requested_context(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    api = real_connect(str(path), "ctx")
    assert api.configuration.host == "https://127.0.0.1:6443"


def test_connect_to_an_unknown_context_is_a_clear_error(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    with pytest.raises(RepackError) as exc:
        real_connect(str(path), "elsewhere")
    assert str(exc.value).startswith(f"cannot load kubeconfig {path} context 'elsewhere':")


def test_plan_with_an_unknown_context_exits_1(tmp_path, monkeypatch):
    from tests.unit.cli.conftest import GUARDED, run

    monkeypatch.setattr(kclient, "connect", real_connect)
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    r = run("plan", "-f", GUARDED, "--kubeconfig", path, "--context", "elsewhere")
    assert r.exit_code == 1
    assert r.stderr.startswith(f"error: cannot load kubeconfig {path} context 'elsewhere':")
