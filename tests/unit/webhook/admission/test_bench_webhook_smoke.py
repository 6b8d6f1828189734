"""bench/webhook_latency.py runs end to end for about a second at a low rate, with a few slow and
idle peers: every review is answered with a 200 AdmissionReview (it once answered each with a 500,
built with the coordinator's metrics, and nothing noticed). No timing is asserted: the figures are
the benchmark's, in docs/benchmarks.md."""
from __future__ import annotations

from bench import webhook_latency


def test_the_webhook_latency_benchmark_answers_every_review_with_a_200_admission_review():
    args = webhook_latency.parse_args(["--rate", "20", "--seconds", "1", "--connections", "2",
                                       "--slow", "2", "--idle", "2", "--idle-tcp", "1", "--warmup", "0.5"])
    result = webhook_latency.measure(args)
    assert result["errors"] == []
    assert result["sent"] == 20 and result["answered_ok"] == 20 and len(result["latencies"]) == 20
    assert result["patched"] >= 1  # replacement pods matched their records: the index was served
    hostile = result["hostile"]
    assert hostile["slow"]["opened"] >= 2 and hostile["idle"]["opened"] >= 2 and hostile["tcp"]["opened"] >= 1
    assert "\n".join(webhook_latency.describe(args, result))  # the report renders
