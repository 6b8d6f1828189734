"""Shared helpers for the CLI tests: run `kubectl repack` in-process, with no cluster behind it.

Every test gets a `no_cluster` guard: connecting to a cluster fails the test unless the test
installs a fake with `fake_cluster`.
"""
from __future__ import annotations

import copy
import json
import os

import pytest
from click.testing import CliRunner

import planner
from kubectl_repack import errors
from kubectl_repack.kube import client as kclient
from kubectl_repack.kube import objects as kobjects
from kubectl_repack.kube import runs as kruns
from kubectl_repack.cli import main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EXAMPLES = os.path.join(REPO, "examples")
SEED3 = os.path.join(EXAMPLES, "seed-3-nodes.yaml")
SEED20 = os.path.join(EXAMPLES, "seed-20-nodes.yaml")
GUARDED = os.path.join(EXAMPLES, "guarded-dryrun.yaml")
SEED20_RUN = os.path.join(EXAMPLES, "seed-20-dryrun.yaml")
NOW = "2026-07-30T08:00:00Z"
R = "huawei.com/ascend-1980"


def run(*args, input=None, env=None):
    """Invoke the CLI; the Result keeps stdout and stderr apart."""
    return CliRunner().invoke(main, [str(a) for a in args], input=input, env=env)


def seed3_objects():
    with open(SEED3, encoding="utf-8") as f:
        return planner.parse_text(f.read(), SEED3)


def flatten(objs):
    out = []
    for o in objs:
        if o.get("kind") == "List":
            out.extend(o["items"])
        else:
            out.append(o)
    return out


class FakeStore:
    """Stands in for kruns.RunStore: keeps RepackRuns in a dict, like the API server would."""

    def __init__(self):
        self.runs = {}
        self.calls = []

    def __call__(self, api):  # used as the RunStore class
        self.calls.append(("connect", api))
        return self

    def get(self, name):
        self.calls.append(("get", name))
        if name not in self.runs:
            raise errors.NotFound(f'reading repackrun {name}: repackruns.repack.volcano.sh "{name}" not found '
                                   "(HTTP 404)", 404)
        return copy.deepcopy(self.runs[name])

    def create(self, obj):
        name = obj["metadata"]["name"]
        self.calls.append(("create", name, "status" in obj))
        if name in self.runs:
            raise errors.Conflict(f"repackrun {name} already exists", 409)
        if obj["metadata"].get("resourceVersion") or obj["metadata"].get("uid"):
            # As the API server answers such a create.
            raise errors.ClusterAPIError(f"creating repackrun {name}: resourceVersion should not be set on "
                                          "objects to be created (HTTP 500)", 500)
        stored = {k: copy.deepcopy(obj[k]) for k in ("apiVersion", "kind", "metadata", "spec")}
        stored["metadata"].update(uid="uid-1", resourceVersion="1", creationTimestamp="2026-07-30T08:00:01Z")
        self.runs[name] = stored
        return copy.deepcopy(stored)

    def annotate_all(self, name, annotations):
        for key, value in annotations.items():
            self.annotate(name, key, value)
        return copy.deepcopy(self.runs[name])

    def annotate(self, name, key, value):
        self.calls.append(("annotate", name, key, value))
        if name not in self.runs:
            raise errors.NotFound(f'annotating repackrun {name}: repackruns.repack.volcano.sh "{name}" not found '
                                   "(HTTP 404)", 404)
        annotations = self.runs[name]["metadata"].setdefault("annotations", {})
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
        return copy.deepcopy(self.runs[name])

    def write_status(self, name, status):
        self.calls.append(("write_status", name))
        self.runs[name]["status"] = copy.deepcopy(status)
        self.runs[name]["metadata"]["resourceVersion"] = "2"
        return copy.deepcopy(self.runs[name])


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch):
    """Any attempt to reach a cluster fails the test (offline paths must stay offline)."""
    def refuse(*a, **kw):
        raise AssertionError("the command tried to connect to a cluster")
    monkeypatch.setattr(kclient, "connect", refuse)


@pytest.fixture
def fake_cluster(monkeypatch):
    """A cluster holding the seed's 3-node objects and an empty RepackRun store."""
    state = {"objects": flatten(seed3_objects()), "connected": [], "store": FakeStore()}

    def connect(kubeconfig=None, context=None, overrides=None):
        state["connected"].append((kubeconfig, context))
        return "api"

    monkeypatch.setattr(kclient, "connect", connect)
    monkeypatch.setattr(kobjects, "read_snapshot", lambda api, kinds=kobjects.SNAPSHOT_KINDS, progress=None:
                        copy.deepcopy(state["objects"]))
    monkeypatch.setattr(kruns, "RunStore", state["store"])
    return state


def as_json(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)
