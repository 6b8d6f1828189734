"""The reason codes of a node's verdict (DESIGN convention 3), in one enum, as the scheduler
framework's Status codes: every NodeVerdict.reason is one of them, and code that acts on a verdict
compares against a member, never a string written again.

A `str` enum whose members print as their value, so tables, messages and serialised output read
exactly the strings they always did ("NotSelected", not "VerdictReason.NOT_SELECTED").
"""
from enum import Enum


class VerdictReason(str, Enum):
    """Why a candidate node was vacated or not."""

    # the planning pass (planner.rounds, planner.plan)
    VACATED = "Vacated"
    RECEIVING_MOVES = "ReceivingMoves"             # it takes pods of a vacated node and stays occupied
    NOT_SELECTED = "NotSelected"                   # a better plan leaves it out, or planning stopped
    NO_FEASIBLE_RECEIVER = "NoFeasibleReceiver"    # one of its pods fits no receiver
    BUDGET_EXCEEDED = "BudgetExceeded"             # maxPerRun, or what one RepackRun's status holds
    MINIMUM_REACHED = "MinimumReached"             # occupied nodes already equal the theoretical minimum
    # a pod that may not move blocks its node (planner.rules, MIG-1..3)
    MIRROR_POD = "MirrorPod"
    POD_TERMINATING = "PodTerminating"
    NOT_SCHEDULED_BY_VOLCANO = "NotScheduledByVolcano"
    DAEMONSET_POD = "DaemonSetPod"
    NO_CONTROLLER = "NoController"
    NO_PODGROUP = "NoPodGroup"
    PODGROUP_OUT_OF_SCOPE = "PodGroupOutOfScope"
    DO_NOT_DISRUPT = "DoNotDisrupt"
    LOCAL_VOLUME = "LocalVolume"
    EVICTION_NOT_AUTHORIZED = "EvictionNotAuthorized"   # planner.plan's `not_evictable`
    TOPOLOGY_UNAVAILABLE = "TopologyUnavailable"        # broken HyperNode tree: no topology gang is placed

    __str__ = str.__str__
    __format__ = str.__format__
