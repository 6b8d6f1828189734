"""A minimal RFC 6902 applier (add/replace/remove/test) so tests check patches independently."""
from __future__ import annotations

import base64
import copy
import json
from typing import Any


class PatchError(Exception):
    """The patch does not apply to the document."""


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"path {path!r} does not start with /")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _parent(doc: Any, tokens: list[str]) -> Any:
    cur = doc
    for t in tokens[:-1]:
        if isinstance(cur, dict):
            if t not in cur:
                raise PatchError(f"missing member {t!r}")
            cur = cur[t]
        elif isinstance(cur, list):
            cur = cur[int(t)]
        else:
            raise PatchError(f"cannot descend into {type(cur).__name__} at {t!r}")
    return cur


def apply_patch(doc: Any, ops: list[dict]) -> Any:
    doc = copy.deepcopy(doc)
    for op in ops:
        tokens = _tokens(op["path"])
        if not tokens:
            raise PatchError("whole-document operations are not expected here")
        parent, last = _parent(doc, tokens), tokens[-1]
        kind = op["op"]
        if kind == "add":
            if isinstance(parent, dict):
                parent[last] = op["value"]
            elif isinstance(parent, list):
                if last == "-":
                    parent.append(op["value"])
                else:
                    idx = int(last)
                    if idx > len(parent):
                        raise PatchError("index out of range")
                    parent.insert(idx, op["value"])
            else:
                raise PatchError(f"add into {type(parent).__name__}")
        elif kind == "replace":
            if isinstance(parent, dict) and last not in parent:
                raise PatchError(f"replace of missing {last!r}")
            parent[last if isinstance(parent, dict) else int(last)] = op["value"]
        elif kind == "remove":
            del parent[last if isinstance(parent, dict) else int(last)]
        else:
            raise PatchError(f"unsupported op {kind}")
    return doc


def decode(response_review: dict) -> list[dict]:
    """The JSONPatch of an AdmissionReview response ([] if none)."""
    resp = response_review["response"]
    if "patch" not in resp:
        return []
    assert resp["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(resp["patch"]))
