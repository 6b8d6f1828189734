"""The Kubernetes and Volcano versions kubectl-repack supports, and the ones CI tests.

SUPPORTED_KUBERNETES is the floor of what the install needs (its ValidatingAdmissionPolicies are GA
from 1.30); `doctor` fails below it and the chart's `kubeVersion` states it. TESTED_KUBERNETES and
TESTED_VOLCANO are the versions the e2e control plane runs (the pins of hack/controlplane/*/go.mod):
`doctor` warns outside them, naming them, and README's support table is rendered from them
(`python -m hack.support_table`). tests/unit/packaging/test_support_table.py fails when these,
the pins, the README table or the chart disagree, and tests/e2e/test_control_plane.py checks that
the control plane CI ran reports exactly these versions.
"""
from __future__ import annotations

import re
from typing import Optional

SUPPORTED_KUBERNETES = (1, 30)
TESTED_KUBERNETES = "v1.37.2"
TESTED_VOLCANO = "v1.14.1"

_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


def minor_of(version: object) -> Optional[tuple[int, int]]:
    """(major, minor) of a version string such as `v1.37.2`, `1.37`, `v1.37.2-gke.100` (None: none)."""
    found = _VERSION.match(str(version or "").strip())
    return (int(found.group(1)), int(found.group(2))) if found else None


def chart_kube_version() -> str:
    """The chart's `kubeVersion` constraint (the `-0` admits pre-release and vendor suffixes)."""
    return ">={}.{}.0-0".format(*SUPPORTED_KUBERNETES)
