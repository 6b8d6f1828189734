"""The RepackRun API as data (`repack.volcano.sh/v1alpha1`): pure, no I/O.

Everything both ends of a run must agree on lives here once: names, phases, reasons, conditions,
the run read through `RunView` and the relocation records with their placement transitions
(`run`), read-only views of any Kubernetes object (`view`), the status a plan and an Execute's
steps become (`status`), times and durations (`times`), the gate and annotations a replacement pod
carries (`gates`), how a new pod is recognised as a victim's replacement (`relocations`,
`matching`), and what a Lease says (`lease`: holder, freshness, annotations). It imports only the
planner and the standard library, so the CLI, the Kubernetes I/O layer, the execution engine and
the webhook process can all depend on it.
"""
