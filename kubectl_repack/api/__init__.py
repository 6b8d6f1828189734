"""The RepackRun API as data (`repack.volcano.sh/v1alpha1`): pure, no I/O.

Everything both ends of a run must agree on lives here once: names and phases (`run`), times and
durations (`times`), the relocation records (`run`), the gate and annotations a replacement pod
carries (`gates`), and how a new pod is recognised as a victim's replacement (`relocations`,
`matching`). It imports only the planner and the standard library, so the CLI, the Kubernetes I/O
layer, the execution engine and the webhook process can all depend on it.
"""
