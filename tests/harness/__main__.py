"""Start and stop the local control plane by hand.

  eval "$(bash hack/build-control-plane.sh --print-env)"
  export KUBECONFIG=$(python -m tests.harness up --npu-nodes 3)   # prints the kubeconfig path
  kubectl get nodes
  python -m tests.harness status
  python -m tests.harness down

`up` leaves the components (and, with --npu-nodes, a node-agent process) running in the
background and records them in <run dir>/state.json; the newest run dir is remembered in
${REPACK_CACHE:-~/.cache/kubectl-repack}/harness-current so `down`/`status` find it.
Progress messages go to stderr; stdout carries only the kubeconfig path.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from .controlplane import ControlPlane, ControlPlaneError, stop_from_state
from .process import pid_alive

CACHE = os.environ.get("REPACK_CACHE") or os.path.join(os.path.expanduser("~"), ".cache",
                                                       "kubectl-repack")
CURRENT = os.path.join(CACHE, "harness-current")


def _current_run_dir(arg: str | None) -> str:
    if arg:
        return arg
    try:
        with open(CURRENT) as f:
            return f.read().strip()
    except OSError:
        raise SystemExit("no running control plane recorded; pass the run dir") from None


def cmd_up(args) -> int:
    t0 = time.monotonic()
    try:
        cp = ControlPlane(keep=True)
        cp.start(stop_at_exit=False)
    except ControlPlaneError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    state_path = os.path.join(cp.run_dir, "state.json")
    if args.npu_nodes:
        log = os.path.join(cp.log_dir, "node-agent.log")
        with open(log, "ab") as out:
            agent = subprocess.Popen(
                [sys.executable, "-m", "tests.harness", "agent", f"--kubeconfig={cp.kubeconfig}",
                 f"--npu-nodes={args.npu_nodes}", f"--cards={args.cards}"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        with open(state_path) as f:
            state = json.load(f)
        state["agent"] = {"pid": agent.pid, "log": log}
        with open(state_path, "w") as f:
            json.dump(state, f, indent=2)
    os.makedirs(CACHE, exist_ok=True)
    with open(CURRENT, "w") as f:
        f.write(cp.run_dir)
    print(f"control plane up in {time.monotonic() - t0:.1f}s ({cp.timings})", file=sys.stderr)
    print(cp.describe_logs(), file=sys.stderr)
    print(f"stop it with: python -m tests.harness down {cp.run_dir}", file=sys.stderr)
    print(cp.kubeconfig)
    return 0


def cmd_down(args) -> int:
    run_dir = _current_run_dir(args.run_dir)
    if not os.path.exists(os.path.join(run_dir, "state.json")):
        print(f"nothing to stop in {run_dir}", file=sys.stderr)
        return 1
    stopped = stop_from_state(run_dir, keep=args.keep)
    print(f"stopped: {', '.join(stopped) or 'nothing was running'}"
          f"{'' if args.keep else '; removed ' + run_dir}", file=sys.stderr)
    try:
        with open(CURRENT) as f:
            if f.read().strip() == run_dir:
                os.remove(CURRENT)
    except OSError:
        pass
    return 0


def cmd_status(args) -> int:
    run_dir = _current_run_dir(args.run_dir)
    try:
        with open(os.path.join(run_dir, "state.json")) as f:
            state = json.load(f)
    except OSError:
        print(f"no state in {run_dir}", file=sys.stderr)
        return 1
    entries = dict(state["components"])
    if state.get("agent"):
        entries["node-agent"] = state["agent"]
    all_up = True
    for name, info in entries.items():
        up = pid_alive(info["pid"])
        all_up &= up
        print(f"{name:24} {'running' if up else 'STOPPED':8} pid {info['pid']:<8} {info['log']}",
              file=sys.stderr)
    print(state["kubeconfig"])
    return 0 if all_up else 1


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["agent"]:  # the node agent as a process: its own options
        from .nodeagent import main as agent_main

        return agent_main(argv[1:])
    p = argparse.ArgumentParser(prog="python -m tests.harness", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start a control plane; print its kubeconfig path")
    up.add_argument("--npu-nodes", type=int, default=0,
                    help="also run a node agent with this many fake NPU nodes")
    up.add_argument("--cards", type=int, default=8, help="cards per fake NPU node")
    up.set_defaults(fn=cmd_up)
    down = sub.add_parser("down", help="stop a control plane started by `up`")
    down.add_argument("run_dir", nargs="?")
    down.add_argument("--keep", action="store_true", help="keep the run dir (logs)")
    down.set_defaults(fn=cmd_down)
    st = sub.add_parser("status", help="show the components of a control plane")
    st.add_argument("run_dir", nargs="?")
    st.set_defaults(fn=cmd_status)
    sub.add_parser("agent", help="run a node agent in the foreground (see `agent --help`)")
    args = p.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    raise SystemExit(main())
