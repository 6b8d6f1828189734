"""A real node for the e2e control plane: containerd, runc and CNI on this machine, with kubelet,
kube-proxy and kube-scheduler built from the same pinned Kubernetes module (hack/build-control-plane.sh).

Two parts with different lifetimes:

* `NodeNetwork` (the control plane's whole life, root only): a bridge `repack-br0` whose gateway
  address (10.244.0.1 by default) is where the API server listens and what it advertises, so pods
  reach it; a dummy interface `repack-svc0` that the Service CIDR is routed to, so a ClusterIP
  packet that kube-proxy does not translate is dropped on this machine instead of leaving through
  the default route; and a FORWARD rule that drops anything from the pod subnet that is not for
  the bridge. Pods only ever talk to this machine and to each other.
* `RealNode` (started by the tests that need it): containerd 1.6 with runc and the bridge +
  host-local + loopback CNI plugins, the locally built pause image as its sandbox image and the
  images under test imported into its `k8s.io` namespace; a kubelet with a `system:node:` client
  certificate; kube-proxy (iptables) for the `kubernetes` Service; kube-scheduler for Deployments.

Every directory is under the control plane's run dir; host-wide state (the two interfaces, the
iptables rules, kube-proxy's chains) is guarded by a lock file, so two runs on one machine take
turns instead of fighting. Teardown: pods on the node are deleted and their containers stopped
by the kubelet, then kubelet, kube-proxy (its chains removed with `--cleanup`), kube-scheduler,
leftover tasks, containerd and its shims are stopped, what they mounted is unmounted, and the
network is removed again.

Why the settings: the VMs this runs on are cgroup v1 (hybrid) without CAP_SYS_RESOURCE, which
needs `restrict_oom_score_adj` (containerd: the kubelet asks for a negative oom_score_adj) and
`failCgroupV1: false` (the default is true from kubelet v1.35, which then refuses to start on
cgroup v1), `cgroupsPerQOS: false`.
"""
from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import yaml

from .pki import issue_client_cert, write_kubeconfig
from .process import Component, ComponentError, free_ports

BRIDGE = "repack-br0"
DUMMY = "repack-svc0"
SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
DEFAULT_SUBNET = "10.244.0.0/24"
RULE_COMMENT = "repack-e2e-node"
LOCK_PATH = "/run/lock/repack-e2e-node.lock"
NODE_NAME = "repack-node"
NODE_LABEL = "repack.test/real-node"
NODE_BINARIES = ("kubelet", "kube-proxy", "kube-scheduler")
# Taints the control plane gives a new Node; the node-lifecycle controller (off in this harness:
# the fake nodes have no kubelet leases) would lift them once the kubelet reports Ready.
CONDITION_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


class NodeError(RuntimeError):
    """The real node cannot be set up; the message names the command or component that failed."""


def run(argv: list[str], check: bool = True, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    except FileNotFoundError as e:
        raise NodeError(f"`{argv[0]}` is not installed ({e}); hack/install-node-deps.sh installs it") from None
    if check and proc.returncode != 0:
        raise NodeError(f"`{' '.join(argv)}` failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def _require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise NodeError(f"{what} needs root (network interfaces, iptables, containerd, kubelet); "
                        "run the e2e tests as root, as CI does")


class NodeNetwork:
    """The host side of the pod network; see the module docstring."""

    def __init__(self, subnet: str | None = None):
        self.subnet = ipaddress.ip_network(subnet or os.environ.get("REPACK_NODE_SUBNET") or DEFAULT_SUBNET)
        self.gateway = str(next(self.subnet.hosts()))
        self._lock = None
        self._rules: list[list[str]] = [
            ["FORWARD", "-s", str(self.subnet), "!", "-o", BRIDGE, "-m", "comment", "--comment", RULE_COMMENT,
             "-j", "DROP"],
            ["FORWARD", "-d", SERVICE_CIDR, "-m", "comment", "--comment", RULE_COMMENT, "-j", "DROP"],
        ]
        self._forwarding: str | None = None
        self._chains_before: dict[tuple[str, str], set[str]] = {}
        self.sink_kind = ""
        self.up = False

    def setup(self, lock_timeout: float = 900) -> "NodeNetwork":
        _require_root("the real e2e node")
        self._take_lock(lock_timeout)
        try:
            self._remove_leftovers()
            with open("/proc/sys/net/ipv4/ip_forward") as f:
                self._forwarding = f.read().strip()
            self._chains_before = {key: _chains(*key) for key in _CHAIN_TABLES}
            run(["ip", "link", "add", BRIDGE, "type", "bridge"])
            run(["ip", "addr", "add", f"{self.gateway}/{self.subnet.prefixlen}", "dev", BRIDGE])
            run(["ip", "link", "set", BRIDGE, "up"])
            self._add_sink()
            for rule in self._rules:
                run(["iptables", "-w", "5", "-I", *rule])
            self.up = True
            self.check_routes()
        except BaseException:
            self.teardown()
            raise
        return self

    def _add_sink(self) -> None:
        """An interface that discards whatever is routed to it, for the Service CIDR: a dummy,
        or where the kernel has no dummy driver (this VM's), an ifb device (which drops every
        packet that tc did not redirect to it)."""
        errors = []
        for kind in ("dummy", "ifb"):
            proc = run(["ip", "link", "add", DUMMY, "type", kind], check=False)
            if proc.returncode == 0:
                run(["ip", "link", "set", DUMMY, "up"])
                run(["ip", "route", "add", SERVICE_CIDR, "dev", DUMMY])
                self.sink_kind = kind
                return
            errors.append(f"{kind}: {proc.stderr.strip()}")
        raise NodeError(f"cannot create a discarding interface for {SERVICE_CIDR}: {'; '.join(errors)}")

    def check_routes(self) -> str:
        """`ip route get` for the kubernetes ClusterIP and a pod address: neither may use the
        default route. Returns the two answers (the tests print them)."""
        svc = run(["ip", "-o", "route", "get", KUBERNETES_SERVICE_IP]).stdout.strip()
        pod = run(["ip", "-o", "route", "get", str(self.subnet.network_address + 2)]).stdout.strip()
        if f"dev {DUMMY}" not in svc:
            raise NodeError(f"ClusterIP {KUBERNETES_SERVICE_IP} is not routed to {DUMMY}: {svc}")
        if f"dev {BRIDGE}" not in pod:
            raise NodeError(f"the pod subnet is not routed to {BRIDGE}: {pod}")
        return f"{svc}\n{pod}"

    def _take_lock(self, timeout: float) -> None:
        os.makedirs(os.path.dirname(LOCK_PATH), exist_ok=True)
        self._lock = open(LOCK_PATH, "w")
        deadline = time.monotonic() + timeout
        told = False
        while True:
            try:
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if not told:
                    print(f"real node: another run holds {LOCK_PATH}; waiting", file=sys.stderr)
                    told = True
                if time.monotonic() > deadline:
                    self._lock.close()
                    self._lock = None
                    raise NodeError(f"another e2e run kept {LOCK_PATH} for {timeout:.0f}s") from None
                time.sleep(1)

    def _remove_leftovers(self) -> None:
        """What a killed earlier run (same lock, so not a running one) left behind: its
        containers' shims (they outlive containerd), its mounts, its interfaces and rules."""
        for pid, cmdline in _processes():
            if "containerd-shim" in cmdline and "repack-cp-" in cmdline and "/node/containerd/" in cmdline:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        stale = [m for m in _mount_points() if m.startswith(tempfile.gettempdir() + "/repack-cp-") and "/node/" in m]
        for point in sorted(stale, key=len, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True)
        for link in (BRIDGE, DUMMY):
            if run(["ip", "link", "show", link], check=False).returncode == 0:
                run(["ip", "link", "del", link], check=False)
        listing = run(["iptables", "-w", "5", "-S", "FORWARD"], check=False).stdout
        for line in listing.splitlines():
            if RULE_COMMENT in line and line.startswith("-A "):
                run(["iptables", "-w", "5", "-D", *_split_rule(line[3:])], check=False)

    def teardown(self) -> None:
        # KUBE-* chains that appeared during the run: kube-proxy's (if --cleanup missed any) and
        # the kubelet's (KUBE-FIREWALL, KUBE-KUBELET-CANARY), which it never removes itself.
        if self.up:
            for key, before in self._chains_before.items():
                _remove_chains(*key, {c for c in _chains(*key) - before if c.startswith("KUBE-")})
        for rule in self._rules:
            while run(["iptables", "-w", "5", "-D", *rule], check=False).returncode == 0:
                pass
        for link in (DUMMY, BRIDGE):
            if run(["ip", "link", "show", link], check=False).returncode == 0:
                run(["ip", "link", "del", link], check=False)
        if self._forwarding is not None:
            with open("/proc/sys/net/ipv4/ip_forward", "w") as f:
                f.write(self._forwarding)
            self._forwarding = None
        if self._lock is not None:
            self._lock.close()  # releases the flock
            self._lock = None
        self.up = False


_CHAIN_TABLES = [(tool, table) for tool in ("iptables", "ip6tables") for table in ("filter", "nat", "mangle")]


def _chains(tool: str, table: str) -> set[str]:
    proc = run([tool, "-w", "5", "-t", table, "-S"], check=False)
    return {line.split()[1] for line in proc.stdout.splitlines() if line.startswith("-N ")}


def _remove_chains(tool: str, table: str, chains: set[str]) -> None:
    """Deletes the rules that jump to `chains`, then flushes and deletes them."""
    if not chains:
        return
    for line in run([tool, "-w", "5", "-t", table, "-S"], check=False).stdout.splitlines():
        if not line.startswith("-A "):
            continue
        words = _split_rule(line[3:])
        if "-j" in words and words[words.index("-j") + 1] in chains and words[0] not in chains:
            run([tool, "-w", "5", "-t", table, "-D", *words], check=False)
    for chain in chains:
        run([tool, "-w", "5", "-t", table, "-F", chain], check=False)
    for chain in chains:
        run([tool, "-w", "5", "-t", table, "-X", chain], check=False)


def _split_rule(spec: str) -> list[str]:
    import shlex

    return shlex.split(spec)


def resolve_node_binaries(bin_dir: str | None = None) -> dict[str, str]:
    bin_dir = bin_dir or os.environ.get("REPACK_NODE_BIN_DIR")
    how = "run `eval \"$(bash hack/build-control-plane.sh --print-env)\"` first (hack/test.sh does this)"
    if not bin_dir:
        raise NodeError(f"REPACK_NODE_BIN_DIR is not set: {how}")
    paths = {b: os.path.join(bin_dir, b) for b in NODE_BINARIES}
    missing = [p for p in paths.values() if not os.access(p, os.X_OK)]
    if missing:
        raise NodeError(f"node binaries missing: {', '.join(missing)}; {how}")
    return paths


def image_archives() -> tuple[tuple[str, str], list[tuple[str, str]]]:
    """((pause image, archive), [(image, archive), ...]) from hack/build-image.sh --print-env."""
    how = "run `eval \"$(bash hack/build-image.sh --print-env)\"` first (hack/test.sh does this)"
    pause = (os.environ.get("REPACK_PAUSE_IMAGE"), os.environ.get("REPACK_PAUSE_ARCHIVE"))
    product = (os.environ.get("REPACK_IMAGE"), os.environ.get("REPACK_IMAGE_ARCHIVE"))
    for name, archive in (pause, product):
        if not name or not archive or not os.path.isfile(archive):
            raise NodeError(f"image archive missing (REPACK_PAUSE_IMAGE/ARCHIVE, REPACK_IMAGE/ARCHIVE): {how}")
    return pause, [product]


class RealNode:
    """containerd + kubelet + kube-proxy + kube-scheduler registered as Node `name`.

    `cp` is a started ControlPlane whose API server listens on `network.gateway`."""

    def __init__(self, cp, network: NodeNetwork, name: str = NODE_NAME, bin_dir: str | None = None,
                 pause: tuple[str, str] | None = None, images: list[tuple[str, str]] | None = None):
        _require_root("the real e2e node")
        if not network.up:
            raise NodeError("the node network is not set up (ControlPlane(node_network=...))")
        self.cp = cp
        self.network = network
        self.name = name
        self.binaries = resolve_node_binaries(bin_dir)
        if pause is None or images is None:
            pause, images = image_archives()
        self.pause_image, self.pause_archive = pause
        self.images = images
        self.dir = os.path.join(cp.run_dir, "node")
        self.log_dir = cp.log_dir
        self.components: dict[str, Component] = {}
        self.timings: list[tuple[str, float]] = []
        self.ports: dict[str, int] = {}
        self.imported: dict[str, str] = {}  # image name -> manifest digest in containerd
        self._cgroups_before = _cgroup_dirs()
        self._stopped = False

    # ---- paths ---------------------------------------------------------------------------
    def path(self, *parts: str) -> str:
        return os.path.join(self.dir, *parts)

    @property
    def containerd_socket(self) -> str:
        return self.path("containerd", "containerd.sock")

    def ctr(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        return run(["ctr", "--address", self.containerd_socket, "--namespace", "k8s.io", *args],
                   check=check, timeout=timeout)

    # ---- start ---------------------------------------------------------------------------
    def start(self, timeout: float = 180) -> "RealNode":
        deadline = time.monotonic() + timeout
        try:
            self._phase("containerd", self._start_containerd, deadline)
            self._phase("images", self._import_images)
            self._phase("kubelet", self._start_kubelet, deadline)
            self._phase("kube-proxy", self._start_kube_proxy, deadline)
            self._phase("kube-scheduler", self._start_scheduler, deadline)
        except BaseException:
            self.cp.mark_failed()
            self.stop()
            raise
        return self

    def _phase(self, name: str, fn, *args):
        t0 = time.monotonic()
        fn(*args)
        self.timings.append((name, round(time.monotonic() - t0, 1)))

    def describe(self) -> str:
        return ", ".join(f"{n} {s:.1f}s" for n, s in self.timings)

    def _launch(self, name: str, argv: list[str]) -> Component:
        comp = Component(name, argv, os.path.join(self.log_dir, f"{name}.log"), die_with_parent=True)
        comp.start()
        self.components[name] = comp
        return comp

    def _wait(self, deadline: float, what: str, ready, interval: float = 0.25):
        last = None
        while True:
            for comp in self.components.values():
                try:
                    comp.check_alive()
                except ComponentError as e:
                    raise NodeError(f"while waiting for {what}: {e}") from None
            try:
                result = ready()
                if result:
                    return result
            except Exception as e:  # noqa: BLE001 - not up yet
                last = e
            if time.monotonic() > deadline:
                logs = "\n".join(f"  {c.name}: {c.log_path}" for c in self.components.values())
                raise NodeError(f"timed out waiting for {what} (last error: {last!r}); logs:\n{logs}")
            time.sleep(interval)

    def _start_containerd(self, deadline: float) -> None:
        for d in ("containerd/root", "containerd/state", "containerd/opt", "cni/net.d", "cni/ipam"):
            os.makedirs(self.path(d), exist_ok=True)
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        config = f"""\
version = 2
root = "{self.path('containerd', 'root')}"
state = "{self.path('containerd', 'state')}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
                    "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{self.containerd_socket}"

[ttrpc]
  address = "{self.containerd_socket}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{self.path('containerd', 'opt')}"

[{cri}]
  sandbox_image = "{self.pause_image}"
  # kubelet asks for a negative oom_score_adj, which needs CAP_SYS_RESOURCE (absent here).
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[{cri}.containerd]
  default_runtime_name = "runc"
  snapshotter = "overlayfs"

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false

[{cri}.cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "{self.path('cni', 'net.d')}"
  max_conf_num = 1
"""
        with open(self.path("containerd", "config.toml"), "w") as f:
            f.write(config)
        # Pods get an address on the bridge; their default route points at the bridge's address
        # (this machine). isGateway stays false: the plugin then neither enables IP forwarding
        # nor masquerades, so nothing a pod sends can be routed off this machine.
        conflist = {
            "cniVersion": "0.4.0", "name": "repack-e2e",
            "plugins": [
                {"type": "bridge", "bridge": BRIDGE, "isGateway": False, "ipMasq": False, "hairpinMode": True,
                 "ipam": {"type": "host-local", "dataDir": self.path("cni", "ipam"),
                          "ranges": [[{"subnet": str(self.network.subnet), "gateway": self.network.gateway}]],
                          "routes": [{"dst": "0.0.0.0/0", "gw": self.network.gateway}]}},
            ],
        }
        with open(self.path("cni", "net.d", "10-repack.conflist"), "w") as f:
            json.dump(conflist, f, indent=2)
        self._launch("containerd", ["containerd", "--config", self.path("containerd", "config.toml"),
                                    "--log-level", "info"])
        self._wait(deadline, "containerd's socket",
                   lambda: os.path.exists(self.containerd_socket) and self.ctr("version", check=False).returncode == 0)

    def _import_images(self) -> None:
        for name, archive in [(self.pause_image, self.pause_archive), *self.images]:
            base = name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name
            self.ctr("images", "import", "--base-name", base, "--digests", "--snapshotter", "overlayfs", archive,
                     timeout=300)
            listing = self.ctr("images", "ls").stdout.splitlines()
            row = next((line.split() for line in listing[1:] if line.split() and line.split()[0] == name), None)
            if row is None:
                raise NodeError(f"`ctr images import {archive}` did not create image {name}; images:\n"
                                + "\n".join(listing))
            self.imported[name] = row[2]
            expected = os.environ.get("REPACK_IMAGE_DIGEST") if name == os.environ.get("REPACK_IMAGE") else None
            if expected and row[2] != expected:
                raise NodeError(f"{archive} holds {name} as {row[2]}, but hack/build-image.sh reported {expected}")

    def _identity(self, name: str, cn: str, org: str | None) -> str:
        cert = issue_client_cert(self.cp.pki, name, cn, org)
        kubeconfig = self.path(f"{name}.kubeconfig")
        write_kubeconfig(kubeconfig, self.cp.server, self.cp.pki, client=cert, user=cn)
        return kubeconfig

    def _start_kubelet(self, deadline: float) -> None:
        kubeconfig = self._identity("kubelet", f"system:node:{self.name}", "system:nodes")
        self.ports["kubelet"], self.ports["kubelet-healthz"] = free_ports(2)
        root = self.path("kubelet")
        os.makedirs(self.path("pod-logs"), exist_ok=True)
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "address": self.network.gateway, "port": self.ports["kubelet"], "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": self.ports["kubelet-healthz"],
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                               "x509": {"clientCAFile": self.cp.pki.ca_cert}},
            "authorization": {"mode": "Webhook"},
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            # cgroup v1 (hybrid) VM without CAP_SYS_RESOURCE: what was found to work.
            "cgroupDriver": "cgroupfs", "failCgroupV1": False, "failSwapOn": False, "cgroupsPerQOS": False,
            "enforceNodeAllocatable": [], "localStorageCapacityIsolation": False,
            "podLogsDir": self.path("pod-logs"),
            # Pods get no resolver: nothing here needs DNS, and no query may leave the machine.
            "resolvConf": "",
            "maxPods": 30,
            "serializeImagePulls": False,
            "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "syncFrequency": "5s", "nodeStatusUpdateFrequency": "5s",
            "shutdownGracePeriod": "0s",
        }
        with open(self.path("kubelet-config.yaml"), "w") as f:
            yaml.safe_dump(config, f)
        self._launch("kubelet", [
            self.binaries["kubelet"],
            f"--config={self.path('kubelet-config.yaml')}",
            f"--kubeconfig={kubeconfig}",
            f"--root-dir={root}",
            f"--cert-dir={self.path('kubelet-pki')}",
            f"--hostname-override={self.name}",
            f"--node-ip={self.network.gateway}",
            f"--node-labels={NODE_LABEL}=true",
            "--v=2",
        ])
        from kubernetes import client

        core = client.CoreV1Api(self.cp.api_client())

        def ready():
            node = core.read_node(self.name)
            conds = {c.type: c.status for c in node.status.conditions or []}
            return node if conds.get("Ready") == "True" else None
        self._wait(deadline, f"node {self.name} Ready", ready, interval=0.5)
        self._clear_condition_taints(core)

    def _clear_condition_taints(self, core) -> None:
        from kubernetes.client.rest import ApiException

        for _ in range(20):
            node = core.read_node(self.name)
            taints = node.spec.taints or []
            keep = [t for t in taints if t.key not in CONDITION_TAINTS]
            if len(keep) == len(taints):
                return
            patch = [{"op": "test", "path": "/metadata/resourceVersion", "value": node.metadata.resource_version},
                     {"op": "replace", "path": "/spec/taints",
                      "value": [core.api_client.sanitize_for_serialization(t) for t in keep]}]
            try:
                core.patch_node(self.name, patch)
            except ApiException as e:
                if e.status not in (409, 422):
                    raise
            time.sleep(0.2)
        raise NodeError(f"could not lift the condition taints of node {self.name}")

    def _kube_proxy_config(self, kubeconfig: str) -> str:
        healthz, metrics = free_ports(2)
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": kubeconfig},
            "mode": "iptables", "hostnameOverride": self.name,
            "clusterCIDR": str(self.network.subnet),
            "healthzBindAddress": f"127.0.0.1:{healthz}", "metricsBindAddress": f"127.0.0.1:{metrics}",
            # Leave the host's conntrack sysctls alone (setting them needs CAP_SYS_RESOURCE-like
            # rights and would outlive the run), and no NodePorts on 127.0.0.1 (route_localnet).
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
            "iptables": {"localhostNodePorts": False, "syncPeriod": "30s", "minSyncPeriod": "0s"},
            "nodePortAddresses": [f"{self.network.gateway}/32"],
        }
        self.ports["kube-proxy-healthz"] = healthz
        path = self.path("kube-proxy-config.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(config, f)
        return path

    def _start_kube_proxy(self, deadline: float) -> None:
        kubeconfig = self._identity("kube-proxy", "system:kube-proxy", None)
        config = self._kube_proxy_config(kubeconfig)
        self._launch("kube-proxy", [self.binaries["kube-proxy"], f"--config={config}", "--v=2"])

        def service_rule():
            out = run(["iptables", "-w", "5", "-t", "nat", "-S", "KUBE-SERVICES"], check=False).stdout
            return f"{KUBERNETES_SERVICE_IP}/32" in out
        self._wait(deadline, "kube-proxy's rule for the kubernetes Service", service_rule, interval=0.5)

    def _start_scheduler(self, deadline: float) -> None:
        kubeconfig = self._identity("kube-scheduler", "system:kube-scheduler", None)
        (port,) = free_ports(1)
        config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                  "clientConnection": {"kubeconfig": kubeconfig}, "leaderElection": {"leaderElect": False}}
        path = self.path("kube-scheduler-config.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(config, f)
        self._launch("kube-scheduler", [
            self.binaries["kube-scheduler"], f"--config={path}", "--bind-address=127.0.0.1",
            f"--secure-port={port}", f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}", "--v=2"])
        import ssl

        from .controlplane import _https_ok

        unverified = ssl._create_unverified_context()
        self._wait(deadline, "kube-scheduler", lambda: _https_ok("127.0.0.1", port, "/healthz", unverified))

    # ---- state for the tests --------------------------------------------------------------
    def running_tasks(self) -> list[str]:
        """containerd task ids (containers and sandboxes) still RUNNING on this node."""
        if "containerd" not in self.components or not self.components["containerd"].alive():
            return []
        out = self.ctr("tasks", "ls", check=False).stdout.splitlines()[1:]
        return [line.split()[0] for line in out if line.split() and line.split()[-1] == "RUNNING"]

    # ---- stop ----------------------------------------------------------------------------
    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        errors: list[str] = []
        self._delete_pods(errors)
        for name in ("kube-scheduler", "kube-proxy", "kubelet"):
            comp = self.components.get(name)
            if comp is not None:
                comp.stop()
        if "kube-proxy" in self.components:
            proc = run([self.binaries["kube-proxy"], "--cleanup", f"--config={self.path('kube-proxy-config.yaml')}"],
                       check=False)
            if proc.returncode != 0:
                errors.append(f"kube-proxy --cleanup: {proc.stderr.strip()[-500:]}")
        self._kill_tasks(errors)
        if "containerd" in self.components:
            self.components["containerd"].stop()
        self._kill_shims()
        self._unmount_all(errors)
        self._remove_cgroups()
        self._remove_cni_cache()
        self._delete_node()
        if errors:
            print("real node teardown: " + "; ".join(errors), file=sys.stderr)

    def _delete_pods(self, errors: list[str]) -> None:
        """Let the kubelet stop the pods (containers, sandboxes, CNI DEL) while it still runs."""
        kubelet = self.components.get("kubelet")
        if kubelet is None or not kubelet.alive():
            return
        from kubernetes import client

        try:
            core = client.CoreV1Api(self.cp.api_client())
            for pod in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={self.name}").items:
                core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0)
        except Exception as e:  # noqa: BLE001 - the API server may be gone already
            errors.append(f"deleting the node's pods: {e!r}")
        deadline = time.monotonic() + 30
        while self.running_tasks() and time.monotonic() < deadline:
            time.sleep(0.5)

    def _kill_tasks(self, errors: list[str]) -> None:
        for task in self.running_tasks():
            self.ctr("tasks", "kill", "--signal", "SIGKILL", task, check=False)
        deadline = time.monotonic() + 10
        while self.running_tasks() and time.monotonic() < deadline:
            time.sleep(0.2)
        left = self.running_tasks()
        if left:
            errors.append(f"containerd tasks still running: {left}")

    def _kill_shims(self) -> None:
        """containerd-shim-runc-v2 processes of this containerd outlive it; stop them."""
        for pid, cmdline in _processes():
            if "containerd-shim" in cmdline and self.containerd_socket in cmdline:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def _unmount_all(self, errors: list[str]) -> None:
        """Unmount everything mounted under the node's directory (volumes, rootfs, netns), deepest first."""
        prefix = os.path.realpath(self.dir) + "/"
        for _ in range(3):
            mounts = [m for m in _mount_points() if m.startswith(prefix)]
            if not mounts:
                return
            for point in sorted(mounts, key=len, reverse=True):
                if subprocess.run(["umount", point], capture_output=True).returncode != 0:
                    subprocess.run(["umount", "-l", point], capture_output=True)
        errors.append("mounts left under " + prefix)

    def _remove_cni_cache(self) -> None:
        """libcni's result cache (/var/lib/cni/results) of sandboxes that never got a CNI DEL
        (killed rather than stopped): ours are named after our network, and the loopback entries
        of the same sandboxes. The lock means no other run has entries there."""
        cache = "/var/lib/cni/results"
        try:
            names = os.listdir(cache)
        except OSError:
            return
        ours = {n[len("repack-e2e-"):].rsplit("-", 1)[0] for n in names if n.startswith("repack-e2e-")}
        for n in names:
            if n.startswith("repack-e2e-") or any(n == f"cni-loopback-{sandbox}-lo" for sandbox in ours):
                try:
                    os.remove(os.path.join(cache, n))
                except OSError:
                    pass

    def _remove_cgroups(self) -> None:
        """The cgroup directories containerd made for the pods (`k8s.io/<id>` in each v1
        hierarchy), deepest first; rmdir only succeeds for empty ones."""
        for path in sorted(_cgroup_dirs() - self._cgroups_before, key=len, reverse=True):
            try:
                os.rmdir(path)
            except OSError:
                pass

    def _delete_node(self) -> None:
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        try:
            client.CoreV1Api(self.cp.api_client()).delete_node(self.name)
        except ApiException:
            pass
        except Exception:  # noqa: BLE001 - API server already stopped
            pass


def _processes() -> list[tuple[int, str]]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                found.append((int(pid), f.read().replace(b"\0", b" ").decode(errors="replace")))
        except OSError:
            continue
    return found


def _mount_points() -> list[str]:
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4].replace("\\040", " ") for line in f]


def _cgroup_dirs() -> set[str]:
    """Every directory under <hierarchy>/k8s.io in /sys/fs/cgroup (what containerd's CRI creates)."""
    found = set()
    root = "/sys/fs/cgroup"
    try:
        hierarchies = os.listdir(root)
    except OSError:
        return found
    for h in hierarchies:
        top = os.path.join(root, h, "k8s.io")
        if not os.path.isdir(top):
            continue
        for dirpath, _dirs, _files in os.walk(top):
            found.add(dirpath)
    return found


def local_processes(pattern: str) -> list[tuple[int, str, bool]]:
    """Processes whose command line contains `pattern`: (pid, cmdline, in_container), where
    in_container means the process lives in another PID namespace than this one (a container)."""
    mine = os.readlink("/proc/self/ns/pid")
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            ns = os.readlink(f"/proc/{pid}/ns/pid")
        except OSError:
            continue
        if pattern in cmdline:
            found.append((int(pid), cmdline, ns != mine))
    return found


__all__ = ["NodeNetwork", "RealNode", "NodeError", "local_processes", "NODE_NAME", "NODE_LABEL", "BRIDGE",
           "DUMMY", "SERVICE_CIDR", "KUBERNETES_SERVICE_IP"]
