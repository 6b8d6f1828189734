"""The Helm chart charts/kubectl-repack under the pinned `helm`: linted, and rendering, object by
object, what `kubectl repack install --dry-run` renders: with default values, and with each value
set as the matching install flag. No cluster is needed; this is e2e because the `helm` is built
from its Go source (the chart as files: tests/unit/deploy/test_helm_chart.py).

`helm` is the one hack/build-helm.sh builds (REPACK_HELM, which hack/test.sh exports; without it
the build script is run here, which reuses the cached binary)."""
from __future__ import annotations

import copy
import os
import subprocess
import sys
from functools import lru_cache

import pytest
import yaml

from kubectl_repack.deploy import chart, manifests
from tests.unit.deploy.test_helm_chart import CHART_DIR, ROOT

pytestmark = pytest.mark.e2e

RELEASE = "repack"


@lru_cache(maxsize=1)
def helm_binary() -> str:
    """The pinned helm: REPACK_HELM, else `hack/build-helm.sh --print-env` (builds it once, cached)."""
    path = os.environ.get("REPACK_HELM")
    if not path:
        done = subprocess.run(["bash", str(ROOT / "hack" / "build-helm.sh"), "--print-env"], capture_output=True,
                              text=True, timeout=1800)
        assert done.returncode == 0, f"hack/build-helm.sh failed:\n{done.stderr}"
        line = next(x for x in done.stdout.splitlines() if x.startswith("export REPACK_HELM="))
        path = line.split("=", 1)[1].strip("'\"")
    assert os.access(path, os.X_OK), f"{path} is not an executable helm"
    return path


def helm(*args, check=True, timeout=300, env=None) -> subprocess.CompletedProcess:
    done = subprocess.run([helm_binary(), *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))
    if check:
        assert done.returncode == 0, f"helm {' '.join(args)}:\n{done.stdout}{done.stderr}"
    return done


def documents(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


def key(obj: dict) -> tuple:
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def helm_template(*args) -> list[dict]:
    return documents(helm("template", RELEASE, str(CHART_DIR), *args).stdout)


def install_dry_run(*flags) -> list[dict]:
    """`kubectl repack install --dry-run -o yaml FLAGS`, as its own process."""
    done = subprocess.run([sys.executable, "-m", "kubectl_repack.cli", "install", "--dry-run", "-o", "yaml", *flags],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return documents(done.stdout)


def without_keep(obj: dict) -> dict:
    """The chart's CRD as install renders it: without the annotation that keeps it (the one
    difference, on purpose: Helm must never delete the CRD and with it every RepackRun)."""
    obj = copy.deepcopy(obj)
    annotations = obj["metadata"].pop("annotations")
    assert annotations == chart.KEEP, annotations
    return obj


def assert_same_objects(rendered: list[dict], installed: list[dict]) -> None:
    by_helm, by_install = {key(o): o for o in rendered}, {key(o): o for o in installed}
    assert len(by_helm) == len(rendered) and len(by_install) == len(installed)
    assert set(by_helm) == set(by_install), (sorted(set(by_helm) - set(by_install)),
                                             sorted(set(by_install) - set(by_helm)))
    for k, obj in by_helm.items():
        if obj["kind"] == "CustomResourceDefinition":
            obj = without_keep(obj)
        assert obj == by_install[k], f"{k}: the chart renders it differently from install"


def test_helm_lint_passes_strict():
    done = helm("lint", "--strict", str(CHART_DIR))
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


def test_default_values_render_what_install_renders():
    rendered = helm_template("--namespace", manifests.NAMESPACE)
    installed = install_dry_run()
    # The one object the chart leaves to Helm: the release namespace (helm install --create-namespace),
    # which Helm needs before the release's objects exist.
    assert [key(o) for o in installed if o["kind"] == "Namespace"] == [("Namespace", "", manifests.NAMESPACE)]
    assert_same_objects(rendered, [o for o in installed if o["kind"] != "Namespace"])
    # neither reads a cluster, so neither renders the NetworkPolicy (install: warns; helm: lookup is empty)
    assert not [o for o in rendered if o["kind"] == "NetworkPolicy"]


def test_helm_template_without_apiserver_cidrs_says_loudly_that_no_policy_was_rendered():
    """SEC-5: a GitOps render must not leave the webhook port open silently."""
    out = helm("template", RELEASE, str(CHART_DIR), "--namespace", manifests.NAMESPACE).stdout
    assert "# WARNING: no NetworkPolicy rendered for the webhook port" in out
    assert "Set networkPolicy.apiserverCIDRs" in out
    for flags in (("--set", "networkPolicy.apiserverCIDRs={10.0.0.1/32}"), ("--set", "networkPolicy.enabled=false")):
        assert "WARNING: no NetworkPolicy" not in helm("template", RELEASE, str(CHART_DIR), *flags).stdout, flags


def test_every_value_renders_what_its_install_flag_renders(tmp_path):
    """namespace (one that sorts before kube-system in the webhook's namespaceSelector), the
    Namespace itself, a pinned image, placement, API server CIDRs and replacement creators (one
    with a quote and a backslash, which the admission policy's CEL must escape)."""
    digest = "sha256:" + "ab" * 32
    creators = ["system:serviceaccount:team:o'brien\\ctl", "system:kube-controller-manager"]
    values = {"namespace": "apps", "createNamespace": True,
              "image": {"repository": "registry.example/repack-webhook", "digest": digest},
              "nodeSelector": {"node-role.kubernetes.io/infra": "", "zone": "a"},
              "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"},
                              {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}],
              "priorityClassName": "system-cluster-critical",
              "networkPolicy": {"apiserverCIDRs": ["10.0.0.9/32", "10.0.0.10/32", "2001:db8::/64"]},
              "replacementCreators": creators}
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    rendered = helm_template("--namespace", "default", "-f", str(path))
    installed = install_dry_run(
        "--repack-namespace", "apps", "--image", f"registry.example/repack-webhook@{digest}",
        "--node-selector", "node-role.kubernetes.io/infra=,zone=a",
        "--tolerations", "dedicated=infra:NoSchedule,node-role.kubernetes.io/control-plane",
        "--priority-class", "system-cluster-critical",
        *[a for c in values["networkPolicy"]["apiserverCIDRs"] for a in ("--apiserver-cidr", c)],
        *[a for c in creators for a in ("--replacement-creator", c)])
    assert_same_objects(rendered, installed)
    kinds = {o["kind"] for o in rendered}
    assert {"Namespace", "NetworkPolicy"} <= kinds
    hook = next(o for o in rendered if o["kind"] == "MutatingWebhookConfiguration")["webhooks"][0]
    assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["apps", "kube-system"]


def test_resources_reach_only_their_container():
    rendered = helm_template("--namespace", manifests.NAMESPACE, "--set", "resources.controller.limits.memory=2Gi")
    default = helm_template("--namespace", manifests.NAMESPACE)

    def resources(objs):
        return {c["name"]: c["resources"] for o in objs if o["kind"] == "Deployment"
                for c in o["spec"]["template"]["spec"]["containers"]}

    changed, before = resources(rendered), resources(default)
    assert changed["controller"]["limits"]["memory"] == "2Gi" and before["controller"]["limits"]["memory"] == "1Gi"
    assert changed["controller"]["requests"] == before["controller"]["requests"]
    assert {k: v for k, v in changed.items() if k != "controller"} == \
        {k: v for k, v in before.items() if k != "controller"}


def test_network_policy_disabled_renders_none_even_with_cidrs():
    rendered = helm_template("--namespace", manifests.NAMESPACE, "--set", "networkPolicy.enabled=false",
                             "--set", "networkPolicy.apiserverCIDRs={10.0.0.1/32}")
    assert not [o for o in rendered if o["kind"] == "NetworkPolicy"]
    with_cidr = helm_template("--namespace", manifests.NAMESPACE, "--set", "networkPolicy.apiserverCIDRs={10.0.0.1/32}")
    (policy,) = [o for o in with_cidr if o["kind"] == "NetworkPolicy"]
    assert policy["spec"]["ingress"][0]["from"] == [{"ipBlock": {"cidr": "10.0.0.1/32"}}]


def test_a_parent_charts_global_values_are_accepted():
    """The values schema is closed (a misspelt value fails), except for what every subchart receives."""
    assert helm_template("--namespace", manifests.NAMESPACE, "--set", "global.imageRegistry=registry.example")
    done = helm("template", RELEASE, str(CHART_DIR), "--set", "nodeSelectors.zone=a", check=False)
    assert done.returncode != 0 and "nodeSelectors" in done.stderr


def test_values_the_install_refuses_are_refused():
    """No replacement creator (install falls back to its defaults; the chart lists them in values.yaml)
    and a malformed digest fail at render time with the value named."""
    done = helm("template", RELEASE, str(CHART_DIR), "--set-json", "replacementCreators=[]", check=False)
    assert done.returncode != 0 and "replacementCreators" in done.stderr
    done = helm("template", RELEASE, str(CHART_DIR), "--set", "image.digest=latest", check=False)
    assert done.returncode != 0 and "digest" in done.stderr
