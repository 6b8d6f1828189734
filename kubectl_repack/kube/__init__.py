"""The one Kubernetes I/O layer: every call to the API server of the plugin and the webhook process.

`client` connects and turns every API failure into the `kubectl_repack.errors` tree (raised
`from` the cause, naming what was being done) and holds the one conflict-retry policy; `objects`
lists and reads pods, PDBs and the planner's snapshot as raw JSON, patches pods and evicts;
`runs` stores RepackRuns and writes their status by read-modify-write; `lease` is the Lease
client behind both the execute mutex and the coordinator's leader election.

Nothing else imports `kubernetes` except the webhook process's watches (webhook/watch.py), which
stream events rather than make calls, and the e2e tests.
"""
