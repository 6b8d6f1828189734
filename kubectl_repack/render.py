"""What the plugin prints: kubectl-style tables, the per-node card map, and yaml/json objects.

Pure functions from data to text (no I/O, no click), so every format is tested on its content.
yaml/json output is deterministic: objects are put in one canonical key order (the RepackRun CRD's
property order; map keys sorted), so the same inputs give the same bytes.
"""
from __future__ import annotations

import json
from fractions import Fraction
from typing import Optional

from planner import documents
from planner.frag import percent_int
from planner.pools import node_pools
from planner.plan_types import ABOVE_BUDGET, REASON_RECOMMENDED
from planner.verdicts import VerdictReason

from kubectl_repack.api.view import ObjectView, as_map
from kubectl_repack.api.run import MODE_DRY_RUN, relocations

GAP = "   "
WIDTH = 80              # lists of names are wrapped to this many columns
MAP_WIDTH = 32          # card cells drawn per node before the bar is scaled down
NONE = "<none>"


# ---------- tables ----------

def table(headers, rows) -> str:
    """A kubectl-style table: upper-case headers, columns padded to the widest cell."""
    rows = [[("" if c is None else str(c)) for c in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in rows:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))
    lines = []
    for r in [list(headers)] + rows:
        cells = [c.ljust(widths[i]) if i < len(r) - 1 else c for i, c in enumerate(r)]
        lines.append(GAP.join(cells).rstrip())
    return "\n".join(lines)


def elide(text: str, width: int) -> str:
    """`text` in at most `width` characters: the middle replaced by '...' (both ends kept: a job's
    name at the start, the suffix that tells its PodGroups apart at the end). A trailing count
    (' +6', as in 'node-1 +6') is kept whole and the name before it elided."""
    if len(text) <= width:
        return text
    name, sep, count = text.rpartition(" +")
    if sep and count.isdigit() and name:
        return elide(name, max(width - len(sep) - len(count), 4)) + sep + count
    if width <= 3:
        return text[:width]
    head = (width - 3 + 1) // 2
    return text[:head] + "..." + text[len(text) - (width - 3 - head):]


NAME_MIN = 12           # a name column is never elided below this many characters


def fit_table(headers, rows, width: Optional[int], elidable=()) -> str:
    """`table`, but when `width` is given and the table is wider, the `elidable` columns (indexes)
    are narrowed, widest first, down to NAME_MIN, their cells elided in the middle. Without a width
    (output that is not a terminal and no COLUMNS), nothing is cut."""
    rows = [[("" if c is None else str(c)) for c in r] for r in rows]
    if width is not None and rows:
        widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
        over = sum(widths) + len(GAP) * (len(widths) - 1) - width
        while over > 0:
            cols = [i for i in elidable if widths[i] > max(NAME_MIN, len(headers[i]))]
            if not cols:
                break
            i = max(cols, key=lambda c: (widths[c], -c))     # the widest first, one character at a time
            widths[i] -= 1
            over -= 1
        rows = [[elide(c, widths[i]) if i in elidable else c for i, c in enumerate(r)] for r in rows]
    return table(headers, rows)


def _hanging(text: str, head: str, width: Optional[int]) -> str:
    """`head` + `text`, wrapped at `width` (at least 40) under the text's first column; a word is
    never split (no width: one line)."""
    import textwrap

    if width is None or len(head) + len(text) <= width:
        return head + text
    return textwrap.fill(text, width=max(width, 40), initial_indent=head, subsequent_indent=" " * len(head),
                         break_long_words=False, break_on_hyphens=False)


def wrap_field(label: str, value: str, width: Optional[int]) -> str:
    """'Label:  value' with the value wrapped at `width` under itself (no width: one line)."""
    return _hanging(value, f"{label + ':':<16}", width)


# ---------- canonical objects ----------

def _ordered(value, schema):
    if isinstance(value, dict):
        props = (schema or {}).get("properties") or {}
        extra = (schema or {}).get("additionalProperties")
        keys = [k for k in props if k in value] + sorted(k for k in value if k not in props)
        out = {}
        for k in keys:
            sub = props.get(k) if k in props else (extra if isinstance(extra, dict) else None)
            out[k] = _ordered(value[k], sub)
        return out
    if isinstance(value, list):
        items = (schema or {}).get("items")
        return [_ordered(v, items) for v in value]
    return value


_RUN_TOP = ("apiVersion", "kind", "metadata", "spec", "status")
_META_ORDER = ("name", "generateName", "namespace", "uid", "resourceVersion", "generation",
               "creationTimestamp", "deletionTimestamp", "labels", "annotations", "ownerReferences",
               "finalizers")


def canonical_run(obj: dict) -> dict:
    """A RepackRun with keys in the CRD's order (top level as kubectl prints it), maps sorted."""
    from kubectl_repack import schema

    props = schema.run_schema().get("properties") or {}
    out = {}
    for k in list(_RUN_TOP) + sorted(k for k in obj if k not in _RUN_TOP):
        if k not in obj:
            continue
        v = obj[k]
        if k == "metadata" and isinstance(v, dict):
            keys = [m for m in _META_ORDER if m in v] + sorted(m for m in v if m not in _META_ORDER)
            v = {m: (dict(sorted(v[m].items())) if m in ("labels", "annotations") and isinstance(v[m], dict)
                     else v[m]) for m in keys}
            v.pop("managedFields", None)
        elif k in props:
            v = _ordered(v, props[k])
        out[k] = v
    return out


def to_yaml(obj) -> str:
    """YAML as kubectl prints it (keys in the given order, block style, no anchors)."""
    return documents.dump_yaml(obj)


def to_json(obj) -> str:
    """Indented JSON with a final newline."""
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def dump(obj, fmt: str) -> str:
    """`obj` in the -o format: json or yaml."""
    return to_json(obj) if fmt == "json" else to_yaml(obj)


def prints_object(fmt) -> bool:
    """Whether -o prints the object itself (yaml, json, name or a template), not a summary."""
    return fmt in ("yaml", "json", "name") or getattr(fmt, "kind", None) is not None


def object_output(obj: dict, fmt, allow_missing: bool = True) -> str:
    """A RepackRun as `kubectl get repackrun -o FORMAT` prints it: yaml/json in the canonical key
    order; name, jsonpath, jsonpath-as-json and custom-columns over the object as it is (kubectl's
    templates see every field the API server returned, managedFields included)."""
    from kubectl_repack import printing

    kind = getattr(fmt, "kind", fmt)
    if kind in ("yaml", "json"):
        return dump(canonical_run(obj), kind)
    if kind == "name":
        return printing.names([obj])
    if kind == "custom-columns":
        return printing.custom_columns(fmt.template, [obj])
    return printing.jsonpath(fmt.template, obj, allow_missing_keys=allow_missing,
                             as_json=kind == "jsonpath-as-json")


# ---------- the card map ----------

def card_bar(total: int, used: int) -> str:
    """`[##......]`: one cell per card (scaled down past MAP_WIDTH cards)."""
    if total <= 0:
        return "[]"
    cells = total if total <= MAP_WIDTH else MAP_WIDTH
    filled = used if total <= MAP_WIDTH else -(-used * cells // total)
    filled = max(0, min(cells, filled))
    return "[" + "#" * filled + "." * (cells - filled) + "]"


def _what(plan, node, freed, receiving) -> str:
    total, before, after = plan.cards[node]
    if node in freed:
        return "freed"
    if node in receiving:
        return f"+{after - before}"
    if before == 0:
        return "empty"
    return ""


def card_map(plan) -> str:
    """Per provider node: cards, the before -> after bars, and what happened to it (-o wide: the
    default output says where it is instead, as at 2,000 nodes the map is 2,000 lines)."""
    freed = set(plan.freed_nodes)
    receiving = {m.to_node for m in plan.moves}
    rows = [[node, total, f"{card_bar(total, before)} -> {card_bar(total, after)}", _what(plan, node, freed, receiving)]
            for node, (total, before, after) in sorted(plan.cards.items())]
    if not rows:
        return ""
    name_w = max(len(r[0]) for r in rows)
    cards_w = max(len(str(r[1])) for r in rows)
    bar_w = max(len(r[2]) for r in rows)
    return "\n".join(f"{r[0]:<{name_w}}  {r[1]:>{cards_w}}  {r[2]:<{bar_w}}  {r[3]}".rstrip() for r in rows)


# ---------- node pools ----------

# How provider nodes are grouped into pools (node_pools) is planner.pools' (the controller's gauge
# groups them so too); this draws plan's POOLS table from that grouping.


def pool_table(plan, pools: dict, width: Optional[int] = None) -> str:
    """One line per pool: nodes, cards, cards in use and empty nodes before -> after, freed and
    receiving nodes."""
    freed = set(plan.freed_nodes)
    receiving = {m.to_node for m in plan.moves}
    acc: dict = {}
    for node, (total, before, after) in plan.cards.items():
        a = acc.setdefault(pools.get(node, NONE), [0, 0, 0, 0, 0, 0, 0, 0])
        a[0] += 1
        a[1] += total
        a[2] += before
        a[3] += after
        a[4] += before == 0
        a[5] += after == 0
        a[6] += node in freed
        a[7] += node in receiving
    rows = [[pool, a[0], a[1], f"{a[2]} -> {a[3]}", f"{a[4]} -> {a[5]}", a[6], a[7]]
            for pool, a in sorted(acc.items())]
    return fit_table(["POOL", "NODES", "CARDS", "USED", "EMPTY NODES", "FREED", "RECEIVING"], rows, width,
                     elidable=(0,))


# ---------- HyperNodes (TOPO-4) ----------

# Default output lists the HyperNodes whose free nodes (or blocks) change most, so a tree of
# hundreds of HyperNodes stays a screenful; -o wide lists every one.
HYPERNODE_ROWS = 6


def _hypernode_change(row, blocks: bool) -> tuple:
    return (abs(row.blocks_after - row.blocks_before) if blocks else 0, abs(row.free_after - row.free_before))


def hypernode_table(plan, wide: bool = False, width: Optional[int] = None) -> str:
    """One row per HyperNode of plan.hypernodes: tier, provider nodes, free nodes before -> after
    and, with a block goal, blocks before -> after. Not `wide`: the HYPERNODE_ROWS that change most
    (in name order), then one line counting the others."""
    blocks = plan.node_blocks is not None
    rows = list(plan.hypernodes)
    hidden = 0
    if not wide and len(rows) > HYPERNODE_ROWS:
        most = sorted(rows, key=lambda r: (tuple(-c for c in _hypernode_change(r, blocks)), r.name))
        shown = {r.name for r in most[:HYPERNODE_ROWS]}
        hidden = len(rows) - len(shown)
        rows = [r for r in rows if r.name in shown]
    headers = ["HYPERNODE", "TIER", "NODES", "FREE"] + (["BLOCKS"] if blocks else [])
    cells = [[r.name, r.tier, r.nodes, f"{r.free_before} -> {r.free_after}"]
             + ([f"{r.blocks_before} -> {r.blocks_after}"] if blocks else []) for r in rows]
    out = fit_table(headers, cells, None if wide else width, elidable=(0,))
    return out + (f"\n{hidden} more: -o wide" if hidden else "")


def _hypernodes_title(plan) -> str:
    tiers = sorted({r.tier for r in plan.hypernodes})
    tier = ", ".join(str(t) for t in tiers)
    nb = plan.node_blocks
    if nb is not None:
        return f"HYPERNODES (tier {tier}: free nodes and blocks of {nb.size}, before -> after)"
    return f"HYPERNODES (tier {tier}: free nodes before -> after)"


def node_blocks_text(nb) -> str:
    """'B -> A (tier T, size S, required R[, mode])' of a plan's NodeBlocks."""
    mode = f", {nb.mode}" if nb.mode else ""
    return f"{nb.before} -> {nb.after} (tier {nb.tier}, size {nb.size}, required {nb.required}{mode})"


# ---------- plan ----------

def _pct(f: Fraction) -> str:
    return f"{percent_int(f)}%"


def _points(f: Fraction) -> str:
    text = f"{float(f):.1f}"
    return text[:-2] if text.endswith(".0") else text


def _names(names, limit=10) -> str:
    if not names:
        return ""
    shown = ", ".join(names[:limit])
    return f" ({shown}{f', and {len(names) - limit} more' if len(names) > limit else ''})"


def _owner(plan, pod) -> str:
    owner = plan.owners.get(f"{pod.namespace}/{pod.group_name}")
    return f"{owner.kind}/{owner.name}" if owner is not None else NONE


def moves_table(plan, wide=False) -> str:
    """One row per moved pod (wide: with the round that chose it)."""
    headers = ["NAMESPACE", "PODGROUP", "OWNER", "POD", "FROM", "TO", "CARDS"]
    if wide:
        headers.append("ROUND")
    rows = []
    for m in plan.moves:
        row = [m.pod.namespace, m.pod.group_name, _owner(plan, m.pod), m.pod.name, m.from_node, m.to_node,
               m.cards]
        if wide:
            row.append(m.round)
        rows.append(row)
    return table(headers, rows)


MOVE_GROUPS = 15        # PodGroups the default output lists; -o wide lists every moved pod


def _nodes_cell(names) -> str:
    """One node, or the first and how many more ('train-a-00005 +6')."""
    names = list(dict.fromkeys(names))
    return names[0] + (f" +{len(names) - 1}" if len(names) > 1 else "")


def _workload(plan, pod) -> str:
    """The PodGroup's owner as Kind/name (a VCJob, a ModelServing...), else PodGroup/name: what a
    user recognises, where the PodGroup's own name often carries a UUID."""
    owner = _owner(plan, pod)
    return owner if owner != NONE else f"PodGroup/{pod.group_name}"


def group_moves_table(plan, width: Optional[int] = None, limit: int = MOVE_GROUPS) -> str:
    """One row per moved PodGroup, the most cards first (then most pods, then name): its workload,
    pods and cards, the nodes they leave and the nodes they go to; at most `limit` rows, then one
    line counting the others (-o wide has one row per pod, with the PodGroup's own name)."""
    groups: dict = {}
    for m in plan.moves:
        groups.setdefault((m.pod.namespace, m.pod.group_name), []).append(m)
    order = sorted(groups.items(), key=lambda kv: (-sum(m.cards for m in kv[1]), -len(kv[1]), kv[0]))
    rows = [[ns, _workload(plan, ms[0].pod), len(ms), sum(m.cards for m in ms),
             _nodes_cell(m.from_node for m in ms), _nodes_cell(m.to_node for m in ms)]
            for (ns, name), ms in order[:limit]]
    out = fit_table(["NAMESPACE", "WORKLOAD", "PODS", "CARDS", "FROM", "TO"], rows, width,
                    elidable=(0, 1, 4, 5))
    hidden = len(order) - len(rows)
    return out + (f"\n{hidden} more PodGroup(s): -o wide lists every pod" if hidden else "")


NOTE_ROWS = 5           # notes the default output lists


def _bullet(text: str, width: Optional[int]) -> str:
    """'- text', wrapped at `width` under itself."""
    return _hanging(text, "- ", width)


def blocked_table(plan) -> str:
    """One row per candidate node that was not vacated, with its reason."""
    rows = [[v.node, v.reason, v.pod or NONE, v.filter or NONE, v.message]
            for v in plan.verdicts if not v.vacated]
    return table(["NODE", "REASON", "POD", "FILTER", "MESSAGE"], rows)


def plan_summary(run: dict, plan, source: str, wide: bool = False, saved: str = "",
                 pools: Optional[tuple] = None, width: Optional[int] = None) -> str:
    """The human summary of a planning pass (default output; `wide` adds verdicts and rounds, and
    maps every node and HyperNode instead of only those that change most). `pools`, from
    `node_pools`, adds one summary line per node pool. The default output reads at any size:
    summary, pools, HyperNodes, one line per moved PodGroup (the largest first), a few notes;
    `wide` lists every pod moved, every note and the card map of every node. `width` (the
    terminal's) wraps long fields and narrows tables; None keeps lines whole."""
    spec = ObjectView(run).spec
    goal = (spec.get("goals") or [{}])[0]
    need = goal.get("minFragImprovementPercent") or 0
    improvement = plan.frag_before - plan.frag_after
    pods = len(plan.moves)
    groups = len({f"{m.pod.namespace}/{m.pod.group_name}" for m in plan.moves})
    minimum = f"{plan.minimum}" + ("" if plan.minimum_exact else " (lower bound, not proven)")
    # A plan whose outcome is not RepackRecommended is still shown, as the best found, never as advice.
    best_only = plan.outcome != REASON_RECOMMENDED and bool(plan.moves)
    label = " (best plan found, not recommended)" if best_only else ""
    fields = [
        ("RepackRun", f"{run['metadata']['name']} ({spec.get('mode', 'DryRun')}, {plan.resource}, {source})"),
        ("Outcome", plan.outcome),
        # the reason it stops above the minimum has its own field below
        ("Message", plan.message.replace("; " + plan.above_minimum, "", 1) if plan.above_minimum else plan.message),
        ("Fragmentation", f"{_pct(plan.frag_before)} -> {_pct(plan.frag_after)}"
                          f" ({_points(improvement)} points; required {need})"),
        ("Nodes", f"{plan.providers} providers, occupied {plan.occupied_before} -> {plan.occupied_after},"
                  f" theoretical minimum {minimum}"),
        ("Scope", f"{plan.resolved_podgroups} PodGroup(s), {plan.resolved_nodes} node(s)"),
        ("Freed nodes", f"{len(plan.freed_nodes)}" + _names(plan.freed_nodes) + label),
    ]
    if plan.freed_capacity:      # RELIEF-4: who can use the freed nodes
        fields.append(("Can host", "; ".join(c.text(plan.resource) for c in plan.freed_capacity) + label))
    fields.append(("Moved", f"{plan.moved_cards} {plan.resource} in {pods} pod(s) of {groups} PodGroup(s)" + label))
    if plan.node_blocks is not None:
        fields.append(("Node blocks", node_blocks_text(plan.node_blocks) + label))
    if plan.reoccupied:
        fields.append(("Re-occupied", f"{len(plan.reoccupied)}" + _names(plan.reoccupied)
                       + " (idle nodes the plan fills to free more)"))
    if plan.above_minimum:
        fields.append(("Above minimum", plan.above_minimum))
    if best_only:
        fields.append(("Recommendable", _what_would_recommend(plan, need, improvement)))
    if wide:
        fields.append(("Rounds", f"{plan.rounds}"))
    if saved:
        fields.append(("Saved", saved))
    out = "\n".join(wrap_field(k, v, width) for k, v in fields) + "\n"
    if plan.cards and pools:
        how, by_node = pools
        out += f"\nPOOLS (by {how})\n" + pool_table(plan, by_node, width) + "\n"
    if plan.hypernodes:
        out += f"\n{_hypernodes_title(plan)}\n" + hypernode_table(plan, wide, width) + "\n"
    if plan.moves:
        title = f"MOVES{label.upper() if best_only else ''}"
        if wide:
            out += f"\n{title}\n" + moves_table(plan, wide) + "\n"
        else:
            out += f"\nMOVES BY PODGROUP{label.upper() if best_only else ''}\n" + group_moves_table(plan, width) + "\n"
    else:
        out += "\nNo moves.\n"
    if wide:
        if any(not v.vacated for v in plan.verdicts):
            out += "\nBLOCKED CANDIDATES\n" + blocked_table(plan) + "\n"
        else:
            out += "\nNo blocked candidates.\n"
    if plan.notes:
        shown = plan.notes if wide else plan.notes[:NOTE_ROWS]
        out += "\nNOTES\n" + "".join(_bullet(n, width) + "\n" for n in shown)
        if len(shown) < len(plan.notes):
            out += f"{len(plan.notes) - len(shown)} more note(s): -o wide\n"
    if plan.cards and wide:
        out += f"\nCARDS ({plan.resource} per node: before -> after)\n" + card_map(plan) + "\n"
    elif plan.cards:
        out += "\nCard map of every node: -o wide\n"
    return out


def _what_would_recommend(plan, need: int, improvement: Fraction) -> str:
    """What blocks the best plan found from being recommended: the threshold, the budget, or that
    it frees no node (FRAG-4 needs both the improvement and a freed node)."""
    reasons = []
    nb = plan.node_blocks
    if nb is not None and nb.after < nb.required:
        reasons.append(f"it leaves {nb.after} block(s) of {nb.size} free node(s) in tier-{nb.tier} HyperNodes and "
                       f"the run requires {nb.required} (networkTopology.requiredNodeBlocks)")
    if not plan.freed_nodes:
        reasons.append("it frees no node (FRAG-4 requires one; -o wide shows why each node stays)")
    if improvement < need:
        reasons.append(f"it lowers fragmentation by {_points(improvement)} points and the run requires {need}: "
                       f"goals[0].minFragImprovementPercent <= {max(int(improvement), 0)}"
                       " would accept it")
    budget = [v for v in plan.verdicts if v.reason == VerdictReason.BUDGET_EXCEEDED]
    if budget:
        reasons.append(f"maxPerRun keeps {len(budget)} more node(s) from being vacated ({budget[0].message})")
    elif plan.above_minimum_reason == ABOVE_BUDGET:
        reasons.append("a larger maxPerRun would let it vacate more nodes (see Above minimum)")
    return "; ".join(reasons) or "see the message above"


# ---------- status of a stored run ----------

def wrap_names(names, width: int = WIDTH, indent: str = "  ") -> str:
    """Names separated by commas, wrapped to `width` columns (a name is never split)."""
    import textwrap

    return textwrap.fill(", ".join(names), width=width, initial_indent=indent, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False)


def _cell(v):
    if v is None or v == "":
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _frag(a, b=None):
    if a is None and b is None:
        return "-"
    if b is None:
        return f"{a}%"
    return f"{_cell(a)}% -> {_cell(b)}%"


def _status_blocks_row(planned, observed) -> list:
    """The plan-vs-result row of status.plan.summary.nodeBlocks and status.result.nodeBlocks
    (TOPO-3): blocks before -> after as planned, and after as counted on live state ([] when the run
    has no block goal)."""
    planned, observed = as_map(planned), as_map(observed)
    if not planned and not observed:
        return []
    goal = planned or observed
    return [f"Blocks (tier {_cell(goal.get('tier'))}, size {_cell(goal.get('nodeBlockSize'))})",
            f"{_cell(planned.get('before'))} -> {_cell(planned.get('after'))}" if planned else "-",
            _cell(observed.get("after")) if observed else "-"]


def target_line(target) -> str:
    """One line for status.result.target (RELIEF-3): the targets and what became of them ('' when
    the run has none). While the executor waits, that it waits; afterwards its message, e.g.
    `repack-demo/big-pg: bound 4.2 s after the nodes were vacated (2 pods nominated to node-01)`."""
    if not isinstance(target, dict) or not target:
        return ""
    groups = ", ".join(map(str, target.get("podGroups") or ())) or "?"
    if target.get("message"):
        return f"{groups}: {target['message']}"
    if target.get("vacatedAt") and not target.get("bound"):
        return f"{groups}: the planned nodes were vacated at {target['vacatedAt']}; waiting for it to be bound"
    return f"{groups}: {'bound' if target.get('bound') else 'not bound'}"


def run_status(obj: dict) -> str:
    """`kubectl repack status NAME`: phase, conditions, plan vs result, moves and relocations."""
    view = ObjectView(obj)
    meta, spec, st = view.meta, view.spec, view.status
    goal = (spec.get("goals") or [{}])[0]
    plan = st.get("plan") or {}
    summary = plan.get("summary") or {}
    result = st.get("result") or {}
    lines = [
        f"Name:        {meta.get('name', '')}",
        f"Mode:        {spec.get('mode', '')}",
        f"Resource:    {goal.get('resource', '')}",
        f"Phase:       {st.get('phase') or 'Pending'}",
    ]
    for label, key in (("Started:", "startTime"), ("Completed:", "completionTime")):
        if st.get(key):
            lines.append(f"{label:<13}{st[key]}")
    if st.get("message"):
        lines.append(f"Message:     {st['message']}")
    target = target_line(result.get("target"))
    if target:
        lines.append(f"Target:      {target}")
    out = "\n".join(lines) + "\n"
    conds = st.get("conditions") or []
    out += "\nCONDITIONS\n"
    out += (table(["TYPE", "STATUS", "REASON", "MESSAGE"],
                  [[c.get("type"), c.get("status"), _cell(c.get("reason")), _cell(c.get("message"))]
                   for c in conds]) if conds else "<none>") + "\n"
    rows = [
        ["Fragmentation", _frag(summary.get("fragBeforePercent"), summary.get("fragAfterPercent"))
         if summary else "-", _frag(result.get("fragAfterPercent")) if result else "-"],
        ["Freed nodes", _cell(summary.get("freedNodeCount")), _cell(result.get("freedNodeCount"))],
        ["Moved cards", _cell(summary.get("movedCardCount")), _cell(result.get("movedCardCount"))],
        ["Verified", "-", _cell(result.get("metricsVerified"))],
    ]
    blocks = _status_blocks_row(summary.get("nodeBlocks"), result.get("nodeBlocks"))
    if blocks:
        rows.insert(2, blocks)   # beside the freed nodes they are made of
    freed_plan, freed_result = plan.get("freedNodes") or [], result.get("freedNodes") or []
    freed_row = ["Freed", ", ".join(freed_plan) or "-", ", ".join(freed_result) or "-"]
    long_freed = len(table(["", "PLAN", "RESULT"], [freed_row]).splitlines()[-1]) > WIDTH
    if long_freed:  # one cell per list would make a line thousands of columns wide: listed below
        freed_row = ["Freed", f"{len(freed_plan)} node(s), below" if freed_plan else "-",
                     f"{len(freed_result)} node(s), below" if freed_result else "-"]
    rows.append(freed_row)
    vacated = [v for v in result.get("vacatedNodes") or () if isinstance(v, dict)]
    taken = [v for v in vacated if v.get("takenBy")]
    if "vacatedNodes" in result:   # ours only: the Go implementation does not write it
        at = 1 + next(i for i, r in enumerate(rows) if r[0] == "Freed nodes")
        rows.insert(at, ["Vacated nodes", _cell(summary.get("freedNodeCount")),
                         f"{len(vacated)}" + (f" ({len(taken)} in use)" if taken else "")])
    scope = summary.get("resolvedScope")
    if scope:
        rows.append(["Scope", f"{scope.get('podGroupCount', 0)} PodGroup(s), {scope.get('nodeCount', 0)} node(s)",
                     "-"])
    out += "\n" + table(["", "PLAN", "RESULT"], rows) + "\n"
    if long_freed:
        for label, names in (("PLAN", freed_plan), ("RESULT", freed_result)):
            if names:
                out += f"\nFREED NODES ({label}, {len(names)})\n" + wrap_names(names) + "\n"
    if taken:   # vacated by the run, then taken by a waiting workload: not free, but what the run was for
        out += (f"\nVACATED NODES IN USE ({len(taken)} of {len(vacated)})\n"
                + table(["NODE", "TAKEN BY"], [[v.get("node"), ", ".join(map(str, v["takenBy"]))] for v in taken])
                + "\n")
    moves = plan.get("moves") or []
    if moves:
        mrows = []
        for m in moves:
            owner = m.get("owner") or {}
            o = f"{owner.get('kind')}/{owner.get('name')}" if owner else NONE
            for p in m.get("pods") or []:
                mrows.append([m.get("namespace"), m.get("podGroupName"), o, p.get("name"), p.get("fromNode"),
                              p.get("toNode"), p.get("cards")])
        out += "\nPLANNED MOVES\n" + table(["NAMESPACE", "PODGROUP", "OWNER", "POD", "FROM", "TO", "CARDS"],
                                          mrows) + "\n"
    rel = relocations(st)
    out += "\nRELOCATIONS\n"
    if rel:
        rrows = []
        for r in rel:
            pl = r.placement
            rrows.append([r.namespace, r.victim_pod_name, _cell(r.eviction.phase), _cell(pl.phase),
                          _cell(r.planned_node_name), _cell(pl.selected_node_name),
                          _cell(pl.actual_node_name), _cell(pl.replacement_pod_name)])
        out += table(["NAMESPACE", "VICTIM", "EVICTION", "PLACEMENT", "PLANNED", "SELECTED", "ACTUAL",
                      "REPLACEMENT"], rrows) + "\n"
    else:
        out += "<none>" + (" (DryRun runs evict nothing)" if spec.get("mode") == MODE_DRY_RUN else "") + "\n"
    return out


__all__ = ["no_provider_warning", "unknown_resource", "node_pools", "pool_table", "hypernode_table", "node_blocks_text", "table", "canonical_run", "to_yaml", "to_json", "dump", "card_bar", "card_map", "moves_table",
           "blocked_table", "plan_summary", "run_status", "target_line", "wrap_names"]


def _extended_resources(snapshot, nonzero: bool) -> str:
    """`a.com/x (3 nodes), b.com/y (1 node)`: the extended resources nodes list in their allocatable
    (with `nonzero`, only where the amount is not 0), and on how many nodes."""
    found: dict = {}
    for n in snapshot.nodes:
        for name, amount in n.allocatable.items():
            if "/" in name and (amount or not nonzero):
                found[name] = found.get(name, 0) + 1
    return ", ".join(f"{name} ({count} node{'s' if count != 1 else ''})" for name, count in sorted(found.items()))


def unknown_resource(snapshot, resource: str) -> str:
    """When no node lists `resource` at all (a typo, or the wrong cluster): what the nodes do list
    instead, for an error on spec.goals[0].resource; "" when some node lists it, even as 0."""
    if any(resource in n.allocatable for n in snapshot.nodes):
        return ""
    if not snapshot.nodes:
        return f"no node advertises {resource} (there is no Node)"
    listed = _extended_resources(snapshot, nonzero=False)
    return f"no node advertises {resource} (nodes advertise: {listed or 'no extended resource'})"


def no_provider_warning(snapshot, resource: str) -> str:
    """When nodes list `resource` but none has any of it allocatable, say so and list the extended
    resources that nodes do have; "" when some node has it. (A resource no node lists at all is an
    error: unknown_resource.)"""
    if any(n.allocatable.get(resource) for n in snapshot.nodes):
        return ""
    if not snapshot.nodes:
        return f"the snapshot has no Nodes; nothing can be planned for {resource}"
    listed = _extended_resources(snapshot, nonzero=True)
    return (f"no node advertises {resource}; extended resources found: {listed}" if listed else
            f"no node advertises {resource}, and no node advertises any extended resource")

