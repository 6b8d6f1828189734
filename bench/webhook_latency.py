"""Admission latency of the webhook over TLS on loopback at a fixed request rate (not a test).

Starts the webhook in a child process (gunicorn as in production, or `--server werkzeug`) with a
freshly generated CA and a serving certificate for 127.0.0.1, and a synthetic relocation index of
one Running Execute run with 200 open records (VCJob, ReplicaSet and ModelServing victims). The
parent sends AdmissionReviews on keep-alive HTTPS connections at `--rate` requests/s for
`--seconds` (open loop: request i is due at t0 + i/rate, and its latency counts from that due
time, so a stalled server cannot hide queueing). About one pod in ten is a replacement. Every
answer must be a 200 AdmissionReview allowing the pod under the request's uid; anything else
counts as an error.

Hostile peers, from a third process (so their work does not pause the measuring client's threads),
held open for the whole measurement and reopened whenever the server closes them:

- `--slow N`: TLS clients that send an AdmissionReview request one byte every 0.5-1 s;
- `--idle M`: TLS clients that finish the handshake and send nothing;
- `--idle-tcp K`: TCP connections that send nothing (not even a TLS ClientHello).

    python3 bench/webhook_latency.py                               # 300 req/s for 20 s, gunicorn
    python3 bench/webhook_latency.py --rate 100 --slow 64 --idle 100 --runs 3
    python3 bench/webhook_latency.py --server werkzeug --rate 100 --seconds 5
    BENCH_STATUS_FLOOD_MIB=1.2 python3 bench/webhook_latency.py --seconds 10   # a big status rewritten 20/s

All clients share 127.0.0.1, and the server allows one peer address MAX_PEER_CONNECTIONS
(webhook.admission.worker) connections: with hostile peers the benchmark raises that cap to fit everything it
opens (`--peer-cap` sets it), since in a cluster the API server does not share an address with
them. Prints p50/p90/p99/max latency, the errors and what the hostile peers saw, per run and the
median over `--runs`. Loopback only; bounded by --seconds (at most 120) per run.
"""
from __future__ import annotations

import argparse
import collections
import gc
import http.client
import json
import os
import random
import selectors
import signal
import socket
import ssl
import statistics
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
SEAL_KEY = b"bench-seal-key-0123456789abcdef!"   # the records seal the controller would write


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
            "metadata": {"name": "bench-run", "uid": "bench-uid", "creationTimestamp": "2026-07-30T10:00:00Z",
                         "annotations": sealed("bench-uid", relocations)},
            "spec": {"mode": "Execute", "goals": [{"resource": "huawei.com/ascend-1980"}]},
            "status": {"phase": "Running", "plan": {"moves": moves}, "relocations": relocations}}


def sealed(uid: str, records: list) -> dict:
    """The annotations the controller writes over its records: the seal and (when this tree has one,
    A/B runs) the records digest the webhook verifies."""
    from kubectl_repack.api import control

    out = {control.RECORDS_SEAL_ANNOTATION: control.seal(SEAL_KEY, uid, records)}
    if hasattr(control, "records_digest"):
        out[control.RECORDS_DIGEST_ANNOTATION] = control.records_digest(uid, records)
    return out


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


def review_body(i: int, uid: str) -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": NS,
        "operation": "CREATE", "object": pod_object(i), "dryRun": False,
        "userInfo": {"username": "system:serviceaccount:volcano-system:volcano-controllers"}}}).encode()


def mutate_request(i: int) -> bytes:
    """A whole POST /mutate as the API server sends it (what the slow peers drip)."""
    body = review_body(i, str(uuid.uuid4()))
    return (b"POST /mutate?timeout=5s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, */*\r\nContent-Length: %d\r\n\r\n" % len(body)) + body


# --- server side (child process) ---------------------------------------------------------------
def bench_app():
    """The webhook app over the synthetic index with an always-fresh coordinator Lease."""
    from webhook.admission.app import create_app
    from webhook.common.metrics import WebhookMetrics
    from webhook.admission.relocation_store import RelocationStore

    try:
        store = RelocationStore(key=SEAL_KEY)
    except TypeError:   # a tree from before the records seal was checked at admission (A/B runs)
        store = RelocationStore()
    store.replace_all([synthetic_run()])
    flood = float(os.environ.get("BENCH_STATUS_FLOOD_MIB") or 0)
    if flood:
        threading.Thread(target=status_flood, args=(store, flood), name="status-flood", daemon=True).start()
    return create_app(store, lambda now: True, WebhookMetrics())


def status_flood(store, mib: float, period: float = 0.05) -> None:
    """What the RepackRun watch delivers while someone rewrites a big status: every `period` s a
    MODIFIED event of a second Running Execute run whose status is `mib` MiB (settled records:
    nothing to match, all to parse and verify)."""
    record = {"namespace": NS, "podGroupName": "flood-pg", "victimPodUID": "0" * 36, "plannedNodeName": "node-00",
              "eviction": {"phase": "Accepted"}, "placement": {"phase": "Placed", "actualNodeName": "node-00"}}
    size = len(json.dumps(record)) + 40
    records = [dict(record, victimPodName=f"flood-victim-{i:06d}") for i in range(int(mib * 1024 * 1024 / size))]
    run = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun",
           "metadata": {"name": "flood-run", "uid": "flood-uid", "creationTimestamp": "2026-07-30T09:00:00Z",
                        "annotations": sealed("flood-uid", records)},
           "spec": {"mode": "Execute", "goals": [{"resource": "huawei.com/ascend-1980"}]},
           "status": {"phase": "Running", "relocations": records}}
    version = 0
    while True:
        version += 1
        event = json.loads(json.dumps(run))    # a new object per event, as the watch decodes one
        event["metadata"]["resourceVersion"] = str(version)
        store.upsert(event)
        time.sleep(period)


def serve(args: argparse.Namespace) -> None:
    import logging

    from webhook.admission.serve import default_worker_tmp_dir, serve_gunicorn, serve_werkzeug

    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("webhook").setLevel(logging.WARNING)
    if args.server == "werkzeug":
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        serve_werkzeug(bench_app(), "127.0.0.1", args.port, args.cert_dir)
    else:
        import webhook.admission.worker

        if args.peer_cap:
            webhook.admission.worker.MAX_PEER_CONNECTIONS = args.peer_cap  # read by the worker forked below
        # The heartbeat file where production keeps it (a tmpfs), not on a possibly busy disk.
        ns = argparse.Namespace(host="127.0.0.1", port=args.port, cert_dir=args.cert_dir,
                                log_level="warning", worker_tmp_dir=default_worker_tmp_dir())
        serve_gunicorn(ns, app_factory=bench_app)


# --- hostile peers (child process) -------------------------------------------------------------
class Hostile:
    """Slow-dripping, idle-TLS and idle-TCP connections, each reopened when the server closes it."""

    def __init__(self, port: int, ctx: ssl.SSLContext, slow: int, idle: int, idle_tcp: int):
        self.port, self.ctx = port, ctx
        self.sel = selectors.DefaultSelector()
        self.slots = [{"kind": kind, "sock": None, "opened": 0.0, "sent": 0, "next": 0.0}
                      for kind, n in (("slow", slow), ("idle", idle), ("tcp", idle_tcp)) for _ in range(n)]
        self.drip = mutate_request(0)
        self.stats = {kind: collections.Counter() for kind in ("slow", "idle", "tcp")}
        self.held = {kind: [] for kind in ("slow", "idle", "tcp")}  # samples of how many are open

    def open(self, slot: dict) -> None:
        now = time.monotonic()
        if now - slot["opened"] < 0.1:
            slot["next"] = slot["opened"] + 0.1  # reopened at most every 0.1 s (a refusing server)
            return
        slot["opened"], slot["sent"] = now, 0
        stats = self.stats[slot["kind"]]
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=2)
            if slot["kind"] != "tcp":
                sock = self.ctx.wrap_socket(sock, server_hostname="127.0.0.1")
            sock.setblocking(False)
        except OSError:
            stats["refused"] += 1
            slot["next"] = now + 0.1
            return
        stats["opened"] += 1
        slot["sock"] = sock
        slot["next"] = now + random.uniform(0.5, 1.0) if slot["kind"] == "slow" else float("inf")
        self.sel.register(sock, selectors.EVENT_READ, slot)

    def closed(self, slot: dict, answer: bytes) -> None:
        stats = self.stats[slot["kind"]]
        stats["closed by server"] += 1
        if answer:
            stats[f"answered {answer.split(b' ', 2)[1].decode(errors='replace')}"] += 1
        stats["seconds held"] += time.monotonic() - slot["opened"]
        self.sel.unregister(slot["sock"])
        slot["sock"].close()
        slot["sock"], slot["next"] = None, time.monotonic()

    def readable(self, slot: dict) -> None:
        answer = b""
        while True:
            try:
                data = slot["sock"].recv(4096)
            except (ssl.SSLWantReadError, BlockingIOError):
                if not answer:
                    return  # TLS session tickets: nothing for the application
                data = b""
            except OSError:
                data = b""
            if not data:
                return self.closed(slot, answer)
            answer += data

    def run(self, seconds: float, ready) -> None:
        for slot in self.slots:
            self.open(slot)
        ready()
        end = time.monotonic() + seconds
        next_sample = time.monotonic()
        while time.monotonic() < end and not STOP.is_set():
            now = time.monotonic()
            due = min((slot["next"] for slot in self.slots), default=end)
            for key, _ in self.sel.select(max(0.0, min(due, end, next_sample) - now)):
                if key.data["sock"] is not None:
                    self.readable(key.data)
            now = time.monotonic()
            for slot in self.slots:
                if slot["next"] > now:
                    continue
                if slot["sock"] is None:
                    self.open(slot)
                elif slot["kind"] == "slow":
                    try:
                        slot["sock"].send(self.drip[slot["sent"]:slot["sent"] + 1])
                        slot["sent"] += 1
                        self.stats["slow"]["bytes dripped"] += 1
                    except (ssl.SSLWantWriteError, BlockingIOError):
                        pass
                    except OSError:
                        self.closed(slot, b"")
                        continue
                    slot["next"] = now + random.uniform(0.5, 1.0)
            if now >= next_sample:
                next_sample = now + 0.5
                for kind in self.held:
                    self.held[kind].append(sum(1 for s in self.slots if s["kind"] == kind and s["sock"] is not None))

    def report(self) -> dict:
        out = {}
        for kind, stats in self.stats.items():
            if not any(s["kind"] == kind for s in self.slots):
                continue
            held = self.held[kind] or [0]
            out[kind] = dict(stats, **{"open (mean of samples)": round(statistics.mean(held), 1),
                                       "open (min)": min(held)})
            out[kind]["seconds held"] = round(out[kind].get("seconds held", 0), 1)
        return out


STOP = threading.Event()


def hostile_main(args: argparse.Namespace) -> None:
    signal.signal(signal.SIGTERM, lambda *_: STOP.set())
    ctx = ssl.create_default_context(cafile=os.path.join(args.cert_dir, "ca.crt"))
    hostile = Hostile(args.port, ctx, args.slow, args.idle, args.idle_tcp)
    hostile.run(args.seconds, lambda: print("ready", flush=True))
    print(json.dumps(hostile.report()), flush=True)


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


def answer_problem(status: int, data: bytes, uid: str) -> str:
    """'' when the answer is a 200 AdmissionReview allowing the pod under `uid`, else what is wrong."""
    if status != 200:
        return f"status {status}: {data[:120]!r}"
    try:
        review = json.loads(data)
        response = review["response"]
        if review.get("apiVersion") != "admission.k8s.io/v1" or review.get("kind") != "AdmissionReview":
            return f"not an AdmissionReview: {data[:120]!r}"
        if response.get("uid") != uid:
            return f"uid {response.get('uid')!r}, expected {uid!r}"
        if response.get("allowed") is not True:
            return f"not allowed: {response!r}"
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"unreadable answer ({exc!r}): {data[:120]!r}"
    return ""


def run_client(port: int, ctx: ssl.SSLContext, rate: float, seconds: float, connections: int) -> dict:
    total = int(rate * seconds)
    uids = [str(uuid.uuid4()) for _ in range(total)]
    bodies = [review_body(i, uids[i]) for i in range(total)]
    latencies, service, errors, answers = [], [], [], []   # list.append is atomic: no lock
    patched, answered_ok = [0], [0]
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
                # checked after the run: parsing answers here would hold the GIL while other
                # connections' answers arrive, and show as webhook latency
                answers.append((i, resp.status, data))
                latencies.append(done - due if done > due else done - sent)
                service.append(done - sent)
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
    for i, status, data in answers:
        problem = answer_problem(status, data, uids[i])
        if problem:
            errors.append(f"request {i}: {problem}")
        else:
            answered_ok[0] += 1
            if b'"patch"' in data:
                patched[0] += 1
    return {"sent": total, "elapsed": elapsed, "latencies": sorted(latencies), "service": sorted(service),
            "errors": errors, "patched": patched[0], "answered_ok": answered_ok[0]}


def server_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a process and its descendants (Linux /proc; nan elsewhere):
    the server's cost per review, which a busy machine blurs far less than its latency."""
    try:
        total, todo = 0.0, [pid]
        while todo:
            p = todo.pop()
            with open(f"/proc/{p}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        return total
    except (OSError, ValueError, IndexError):
        return float("nan")


def machine_ticks() -> tuple[int, int]:
    """(steal, total) jiffies of all CPUs from /proc/stat ((0, 0) elsewhere): time the hypervisor
    ran something else while this VM wanted the CPU, which shows as latency nothing here causes."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(v) for v in fh.readline().split()[1:]]
        return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])
    except (OSError, ValueError):
        return 0, 0


def hostile_count(args: argparse.Namespace) -> int:
    return args.slow + args.idle + args.idle_tcp


def peer_cap(args: argparse.Namespace) -> int:
    """The per-peer cap the server runs with (0: webhook.admission.worker's own)."""
    if args.peer_cap or not hostile_count(args):
        return args.peer_cap
    return hostile_count(args) + args.connections + 16


def measure(args: argparse.Namespace) -> dict:
    """One run: a fresh server (and hostile peers), the measured load, everything stopped again."""
    from kubectl_repack.api import installed
    from kubectl_repack.deploy import certs

    script, repo = str(Path(__file__).resolve()), str(Path(__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory() as tmp:
        bundle = certs.generate(installed.WEBHOOK, installed.NAMESPACE, extra_sans=["127.0.0.1"])
        certs.write_pem(tmp, bundle)
        port = free_port()
        child = subprocess.Popen([sys.executable, script, "--serve", "--port", str(port), "--cert-dir", tmp,
                                  "--server", args.server,
                                  "--peer-cap", str(peer_cap(args))], cwd=repo)
        hostile, report = None, {}
        try:
            ctx = ssl.create_default_context(cadata=bundle.ca_cert_pem.decode())  # verifies the 127.0.0.1 SAN
            wait_ready(port, ctx, time.time() + 30)
            if hostile_count(args):
                hostile = subprocess.Popen([sys.executable, script, "--hostile", "--port", str(port), "--cert-dir", tmp,
                                            "--slow", str(args.slow), "--idle", str(args.idle),
                                            "--idle-tcp", str(args.idle_tcp),
                                            "--seconds", str(args.seconds + args.warmup + 10)],
                                           cwd=repo, stdout=subprocess.PIPE, text=True)
                if hostile.stdout.readline().strip() != "ready":
                    raise SystemExit("the hostile peers did not start")
                time.sleep(args.warmup)  # slow peers are being cut and reopened by now
            cpu0, ticks0 = server_cpu(child.pid), machine_ticks()
            result = run_client(port, ctx, args.rate, args.seconds, args.connections)
            result["server_cpu"] = server_cpu(child.pid) - cpu0
            ticks = machine_ticks()
            result["steal"] = (ticks[0] - ticks0[0]) / (ticks[1] - ticks0[1]) if ticks[1] > ticks0[1] else float("nan")
        finally:
            if hostile is not None:
                hostile.terminate()
                try:
                    out, _ = hostile.communicate(timeout=15)
                    report = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
                except (subprocess.TimeoutExpired, ValueError):
                    hostile.kill()
            child.terminate()
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
    result["hostile"] = report
    return result


def describe(args: argparse.Namespace, result: dict) -> list[str]:
    lat, svc = result["latencies"], result["service"]
    ms = lambda v: f"{v * 1000:.2f} ms"  # noqa: E731
    lines = [f"requests: {result['sent']} at {args.rate:g}/s for {args.seconds:g} s "
             f"(achieved {len(lat) / max(result['elapsed'], 1e-9):.1f}/s), 200 AdmissionReviews {result['answered_ok']}, "
             f"patched (matched) {result['patched']}",
             f"latency from due time: p50 {ms(percentile(lat, 50))}  p90 {ms(percentile(lat, 90))}  "
             f"p99 {ms(percentile(lat, 99))}  max {ms(lat[-1] if lat else float('nan'))}",
             f"service time:          p50 {ms(percentile(svc, 50))}  p99 {ms(percentile(svc, 99))}",
             f"server CPU: {result.get('server_cpu', float('nan')):.2f} s, "
             f"{result.get('server_cpu', float('nan')) * 1000 / max(result['sent'], 1):.2f} ms per review; "
             f"CPU time stolen by the hypervisor: {result.get('steal', float('nan')) * 100:.1f} %",
             f"errors: {len(result['errors'])}"]
    lines += ["  " + line for line in result["errors"][:5]]
    for kind, stats in result["hostile"].items():
        lines.append(f"hostile {kind}: " + ", ".join(f"{k} {v}" for k, v in sorted(stats.items())))
    return lines


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=300.0, help="requests per second (default 300)")
    p.add_argument("--seconds", type=float, default=20.0, help="duration of a run (default 20, at most 120)")
    p.add_argument("--runs", type=int, default=1, help="runs, each with a fresh server (median reported)")
    p.add_argument("--connections", type=int, default=16, help="client keep-alive connections")
    p.add_argument("--server", choices=("gunicorn", "werkzeug"), default="gunicorn")
    p.add_argument("--slow", type=int, default=0, help="slow peers dripping a request a byte every 0.5-1 s")
    p.add_argument("--idle", type=int, default=0, help="idle peers: TLS handshake done, nothing sent")
    p.add_argument("--idle-tcp", type=int, default=0, help="idle peers: TCP connected, nothing sent")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds the hostile peers run before the load")
    p.add_argument("--peer-cap", type=int, default=0,
                   help="the server's per-peer connection cap (default: its own, raised to fit hostile peers)")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--hostile", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--cert-dir", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.seconds = min(args.seconds, 120.0)
    args.runs = max(1, min(args.runs, 10))
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.serve:
        serve(args)
        return 0
    if args.hostile:
        hostile_main(args)
        return 0
    hostile = ", ".join(f"{n} {what}" for n, what in ((args.slow, "slow-dripping TLS"), (args.idle, "idle TLS"),
                                                      (args.idle_tcp, "idle TCP")) if n)
    print(f"server: {args.server} over TLS on 127.0.0.1, index: 1 Running Execute run, "
          f"{RECORDS} open records; load {args.rate:g} req/s on {args.connections} keep-alive connections"
          + (f"; hostile peers held open and reopened: {hostile}" if hostile else ""))
    if peer_cap(args):
        print(f"per-peer connection cap: {peer_cap(args)} (every client here is 127.0.0.1)")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {os.cpu_count()} cores, 1-minute load average {load:.2f} before the first run")
    results = []
    for run in range(args.runs):
        result = measure(args)
        results.append(result)
        print(f"--- run {run + 1} of {args.runs}")
        print("\n".join(describe(args, result)))
    if args.runs > 1:
        p50 = [percentile(r["latencies"], 50) * 1000 for r in results]
        p99 = [percentile(r["latencies"], 99) * 1000 for r in results]
        print(f"--- median of {args.runs} runs: p50 {statistics.median(p50):.2f} ms, p99 {statistics.median(p99):.2f} ms "
              f"(p99 per run: {', '.join(f'{v:.2f}' for v in p99)} ms); "
              f"errors {sum(len(r['errors']) for r in results)}; "
              f"stolen CPU {statistics.median(r.get('steal', float('nan')) * 100 for r in results):.1f} %")
    return 0 if not any(r["errors"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
