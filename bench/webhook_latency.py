"""Admission latency of the webhook over TLS on loopback at a fixed request rate (not a test).

Starts the webhook in a child process (gunicorn as in production, or `--server werkzeug`) with a
freshly generated CA and a serving certificate for 127.0.0.1, and a synthetic relocation index of
one Running Execute run with 200 open records (VCJob, ReplicaSet and ModelServing victims). The
parent sends AdmissionReviews on keep-alive HTTPS connections at `--rate` requests/s for
`--seconds` (open loop: request i is due at t0 + i/rate, and its latency counts from that due
time, so a stalled server cannot hide queueing). About one pod in ten is a replacement.

    python3 bench/webhook_latency.py                 # 300 req/s for 20 s, gunicorn
    python3 bench/webhook_latency.py --server werkzeug --rate 100 --seconds 5

Prints p50/p90/p99/max latency and the error count. Loopback only; bounded by --seconds.
"""
from __future__ import annotations

import argparse
import gc
import http.client
import json
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RECORDS = 200
NS = "bench"


def synthetic_run(records: int = RECORDS) -> dict:
    """One Running Execute RepackRun with `records` open relocations of three workload kinds."""
    relocations, moves = [], []
    for i in range(records):
        kind = i % 3
        if kind == 0:
            job, group = f"train{i}", f"train{i}-pg"
            victim, owner = f"{job}-worker-0", {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": job}
        elif kind == 1:
            rs, group = f"web{i}-6c8f9d", f"podgroup-rs{i}"
            victim, owner = f"{rs}-q7x2z", {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs}
        else:
            ms, group = f"serve{i}", f"serve{i}-0"
            victim = f"{group}-inference-0-1"
            owner = {"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelServing", "name": ms}
        relocations.append({"namespace": NS, "victimPodName": victim, "podGroupName": group,
                            "plannedNodeName": f"node-{i % 16:02d}", "eviction": {"phase": "Accepted"},
                            "placement": {"phase": "WaitingForReplacement"}})
        moves.append({"namespace": NS, "podGroupName": group, "owner": owner, "cards": 1,
                      "pods": [{"name": victim, "fromNode": "node-99", "toNode": f"node-{i % 16:02d}", "cards": 1}]})
    return {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun",
            "metadata": {"name": "bench-run", "uid": "bench-uid", "creationTimestamp": "2026-07-30T10:00:00Z"},
            "spec": {"mode": "Execute", "goals": [{"resource": "huawei.com/ascend-1980"}]},
            "status": {"phase": "Running", "plan": {"moves": moves}, "relocations": relocations}}


def pod_object(i: int) -> dict:
    """A realistic pod body (~2 KB); every 10th is the replacement of record i//10."""
    replacement = i % 10 == 0
    r = (i // 10) % RECORDS
    if replacement and r % 3 == 1:
        rs = f"web{r}-6c8f9d"
        meta = {"generateName": rs + "-", "labels": {"app": f"web{r}", "pod-template-hash": "6c8f9d"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": "u",
                                     "controller": True, "blockOwnerDeletion": True}]}
    elif replacement and r % 3 == 2:
        ms = f"serve{r}"
        meta = {"name": f"{ms}-0-inference-0-1",
                "labels": {"modelserving.volcano.sh/name": ms, "modelserving.volcano.sh/group-name": f"{ms}-0",
                           "modelserving.volcano.sh/role": "inference", "modelserving.volcano.sh/role-id": "inference-0"},
                "annotations": {"scheduling.k8s.io/group-name": f"{ms}-0"},
                "ownerReferences": [{"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelServing",
                                     "name": ms, "uid": "u", "controller": True}]}
    else:
        job = f"train{r}" if replacement else f"other{i}"
        meta = {"name": f"{job}-worker-0", "labels": {"volcano.sh/job-name": job, "volcano.sh/task-spec": "worker"},
                "annotations": {"volcano.sh/job-name": job, "volcano.sh/task-spec": "worker",
                                "scheduling.k8s.io/group-name": f"{job}-pg"},
                "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": job,
                                     "uid": "u", "controller": True, "blockOwnerDeletion": True}]}
    meta["namespace"] = NS
    container = {"name": "trainer", "image": "registry.example.com/ml/trainer:2026.07",
                 "command": ["python", "-m", "train", "--config", "/etc/train/config.yaml"],
                 "env": [{"name": f"VAR_{k}", "value": "x" * 24} for k in range(12)],
                 "resources": {"requests": {"cpu": "8", "memory": "64Gi", "huawei.com/ascend-1980": "1"},
                               "limits": {"huawei.com/ascend-1980": "1"}},
                 "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "cfg", "mountPath": "/etc/train"}]}
    spec = {"schedulerName": "volcano", "restartPolicy": "Never", "containers": [container],
            "nodeSelector": {"accelerator-pool": "ascend-npu"},
            "tolerations": [{"key": "huawei.com/ascend", "operator": "Exists", "effect": "NoSchedule"}],
            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "train-config"}}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def review_body(i: int) -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": NS,
        "operation": "CREATE", "object": pod_object(i), "dryRun": False,
        "userInfo": {"username": "system:serviceaccount:volcano-system:volcano-controllers"}}}).encode()


# --- server side (child process) ---------------------------------------------------------------
def bench_app():
    """The webhook app over the synthetic index with an always-fresh coordinator Lease."""
    from webhook.app import create_app
    from webhook.metrics import WebhookMetrics
    from webhook.relocations import RelocationStore

    store = RelocationStore()
    store.replace_all([synthetic_run()])
    return create_app(store, lambda now: True, WebhookMetrics())


def serve(args: argparse.Namespace) -> None:
    import logging

    from webhook.__main__ import serve_gunicorn, serve_werkzeug

    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("webhook").setLevel(logging.WARNING)
    if args.server == "werkzeug":
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        serve_werkzeug(bench_app(), "127.0.0.1", args.port, args.cert_dir)
    else:
        ns = argparse.Namespace(host="127.0.0.1", port=args.port, cert_dir=args.cert_dir, threads=args.threads,
                                log_level="warning")
        serve_gunicorn(ns, app_factory=bench_app)


# --- client side -------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port: int, ctx: ssl.SSLContext, deadline: float) -> None:
    while time.time() < deadline:
        try:
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=2)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                conn.close()
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("webhook did not become ready")


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


def run_client(port: int, ctx: ssl.SSLContext, rate: float, seconds: float, connections: int) -> dict:
    total = int(rate * seconds)
    bodies = [review_body(i) for i in range(total)]
    latencies, service, errors = [], [], []
    patched = [0]
    lock = threading.Lock()
    counter = iter(range(total))
    t0 = time.perf_counter() + 0.5

    def worker():
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            due = t0 + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            sent = time.perf_counter()
            try:
                conn.request("POST", "/mutate", body=bodies[i], headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                data = resp.read()
                done = time.perf_counter()
                review = json.loads(data)
                ok = resp.status == 200 and review["response"]["allowed"] is True
                uid_ok = review["response"]["uid"] == json.loads(bodies[i])["request"]["uid"]
                with lock:
                    latencies.append(done - due if done > due else done - sent)
                    service.append(done - sent)
                    if "patch" in review["response"]:
                        patched[0] += 1
                    if not (ok and uid_ok):
                        errors.append(f"request {i}: status {resp.status}")
            except Exception as exc:  # noqa: BLE001 - every failure is an error in the report
                with lock:
                    errors.append(f"request {i}: {exc!r}")
                conn.close()
                conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
        conn.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(connections)]
    gc.collect()
    gc.disable()    # the load generator must not pause: its GC would show as webhook latency
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(seconds + 30)
    finally:
        gc.enable()
    elapsed = time.perf_counter() - t0
    return {"sent": total, "elapsed": elapsed, "latencies": sorted(latencies), "service": sorted(service),
            "errors": errors, "patched": patched[0]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=300.0, help="requests per second (default 300)")
    p.add_argument("--seconds", type=float, default=20.0, help="duration (default 20, at most 120)")
    p.add_argument("--connections", type=int, default=16, help="client keep-alive connections")
    p.add_argument("--server", choices=("gunicorn", "werkzeug"), default="gunicorn")
    p.add_argument("--threads", type=int, default=8, help="gunicorn worker threads")
    p.add_argument("--idle", type=int, default=0,
                   help="hold this many idle TCP connections and as many stalled TLS sessions during the run")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--cert-dir", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve:
        serve(args)
        return 0
    args.seconds = min(args.seconds, 120.0)

    from kubectl_repack.deploy import certs

    with tempfile.TemporaryDirectory() as tmp:
        bundle = certs.generate("repack-webhook", "repack-system", extra_sans=["127.0.0.1"])
        certs.write_pem(tmp, bundle)
        port = free_port()
        child = subprocess.Popen([sys.executable, __file__, "--serve", "--port", str(port), "--cert-dir", tmp,
                                  "--server", args.server, "--threads", str(args.threads)],
                                 cwd=str(Path(__file__).resolve().parents[1]))
        try:
            ctx = ssl.create_default_context(cadata=bundle.ca_cert_pem.decode())  # verifies the 127.0.0.1 SAN
            wait_ready(port, ctx, time.time() + 30)
            idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(args.idle)]
            idle += [ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5),
                                     server_hostname="127.0.0.1") for _ in range(args.idle)]
            try:
                result = run_client(port, ctx, args.rate, args.seconds, args.connections)
            finally:
                for s in idle:
                    s.close()
        finally:
            child.terminate()
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
    lat, svc = result["latencies"], result["service"]
    ms = lambda v: f"{v * 1000:.2f} ms"  # noqa: E731
    print(f"server: {args.server} over TLS on 127.0.0.1, index: 1 Running Execute run, {RECORDS} open records"
          + (f"; {args.idle} idle TCP + {args.idle} stalled TLS connections held open" if args.idle else ""))
    print(f"requests: {result['sent']} at {args.rate:g}/s for {args.seconds:g} s "
          f"(achieved {len(lat) / max(result['elapsed'], 1e-9):.1f}/s), patched (matched) {result['patched']}")
    print(f"latency from due time: p50 {ms(percentile(lat, 50))}  p90 {ms(percentile(lat, 90))}  "
          f"p99 {ms(percentile(lat, 99))}  max {ms(lat[-1] if lat else float('nan'))}")
    print(f"service time:          p50 {ms(percentile(svc, 50))}  p99 {ms(percentile(svc, 99))}")
    print(f"errors: {len(result['errors'])}")
    for line in result["errors"][:5]:
        print("  " + line)
    return 0 if not result["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
