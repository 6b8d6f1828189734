"""The preflight's answer (`Check`), the access it asks about, and what every check shares."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Sequence

from kubectl_repack.api.installed import NAMESPACE, NAMESPACE_ENV, WEBHOOK
from kubectl_repack.api.run import GROUP, PLURAL

# What `kubectl repack install` creates, by the names the installer gives it (api.installed).
DEFAULT_NAMESPACE = NAMESPACE
SERVICE = WEBHOOK
CRD_NAME = f"{PLURAL}.{GROUP}"
INSTALL = "kubectl repack install"

OK, FAIL, WARN = True, False, None


@dataclass(frozen=True)
class Check:
    """One preflight answer: ok True (OK), False (FAIL) or None (WARN: could not tell, or not needed)."""
    name: str
    ok: Optional[bool]
    detail: str
    fix: str = ""

    @property
    def verdict(self) -> str:
        return "OK" if self.ok else ("FAIL" if self.ok is False else "WARN")


@dataclass(frozen=True)
class Access:
    """One SelfSubjectAccessReview: may the caller `verb` the cluster-scoped `resource` of `group`?"""
    verb: str
    resource: str = PLURAL
    group: str = GROUP
    why: str = ""

    @property
    def check_name(self) -> str:
        return f"rbac-{self.verb}"


# doctor asks for both; apply needs only `create`
CREATE_RUNS = Access("create", why="kubectl repack apply and kubectl apply of a RepackRun")
PATCH_RUNS = Access("patch", why="kubectl repack cancel")
DEFAULT_ACCESS = (CREATE_RUNS, PATCH_RUNS)


def failed(checks: Sequence[Check]) -> list:
    """The checks that FAILed."""
    return [c for c in checks if c.ok is False]


def namespace_from_env() -> str:
    """The namespace of the in-cluster parts ($REPACK_NAMESPACE, as every command; else repack-system)."""
    return os.environ.get(NAMESPACE_ENV) or DEFAULT_NAMESPACE


def age(seconds: float) -> str:
    """kubectl's AGE style: 45s, 12m, 5h, 3d."""
    seconds = int(max(0, seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * (2 if unit != "m" else 1):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"

