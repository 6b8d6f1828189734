"""The Execute engine (EXEC-1..7): live re-plan, write-ahead relocation records, PodGroup-by-PodGroup
eviction, placement tracking, verification on live state, and the apply workflow around them.

Every decision is taken from the RepackRun's persisted records, never from memory, so a run
survives a crash at any point; every side effect goes through a small interface (`ports`):
a cluster reader, an evictor, a run-status writer, the execute mutex and a clock. The kube layer
implements them on the API server, unit tests in memory. The pure rules are split by concern:
`mutex` (who may take the Lease: one Execute at a time, the cooldown), `evictions` (PDB pre-check,
Eviction API answers, backoff, resume), `tracking` (finding replacements), `outcome` (records,
verification, the terminal condition); `executor` carries one run out, `workflow` is `apply` from
the TTL sweep to releasing the Lease, and `execute_lease` is the mutex on the cluster (through the
kube layer's Lease client).
"""
