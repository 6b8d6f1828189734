"""The one Kubernetes I/O layer: every call to the API server of the plugin and the webhook process.

`client` connects and turns every API failure into the `kubectl_repack.errors` tree (raised
`from` the cause, naming what was being done; 404, 409, 422 and 429 each have their class) and
holds the one conflict-retry policy; `objects` holds the one table of kinds and their REST paths,
lists and reads pods, PDBs and the planner's snapshot as raw JSON, patches pods and evicts, and
applies, deletes and JSON-patches any object by its path (what install does); `runs` stores
RepackRuns and writes their status by read-modify-write (and patches their finalizers); `lease` is
the Lease client behind both the execute mutex and the leader elections; `incluster` is what the
controller needs besides (the seal key, SubjectAccessReviews, Events, expired gates); `webhook_tls`
the certificate manager's reads and writes; `watching` the list-then-watch streams the webhook
process keeps its memory current from; `preflight` the doctor's checks.

Only this package imports `kubernetes` (and urllib3, its transport); the layers above reach the
API server through it.
"""
