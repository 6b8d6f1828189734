"""On whose word the RepackRun controller acts for a run (SEC-1, SEC-2): the creator record it may
trust now, the namespaces that creator may evict in (asked before a run is planned), and the
run-state mark it writes and reads instead of believing the status (kubectl_repack.api.control).

webhook.controller.loop wires these into the engine's hooks (`screen`, `authorize`, `vet`,
`mark`: writes and reads its run-state mark) and reads the mark before it decides anything about a run."""
from __future__ import annotations

import datetime as dt
import logging
from typing import Any, Callable, Optional

from kubectl_repack.api import control
from kubectl_repack.api.control import (RUN_STATE_ANNOTATION, BadStateMark, RunState, UntrustedCreator, creator_of,
                                        creator_problem, read_state_mark, state_disagreement)
from kubectl_repack.api.times import parse_time
from kubectl_repack.api.view import ObjectView
from kubectl_repack.engine.executor import RunMark
from kubectl_repack.engine.workflow import Screening

log = logging.getLogger("webhook.controller")


class RunAuthority:
    """`key()` the records-seal key (also the mark's); `authorize_as(creator, namespaces)` why that
    user may not evict there ('' when they may); `policy_since()` since when the creator admission
    policy is enforced (None: it is not); `now()` the controller's clock."""

    def __init__(self, runs, key: Callable[[], bytes], authorize_as: Callable[[Any, list], str],
                 policy_since: Callable[[], Optional[dt.datetime]], creator_max_age: dt.timedelta,
                 now: Callable[[], dt.datetime]):
        self.runs, self.key, self.authorize_as = runs, key, authorize_as
        self.policy_since, self.creator_max_age, self.now = policy_since, creator_max_age, now

    # -- the creator (SEC-1) --
    def trusted_creator(self, run: dict) -> tuple:
        """(creator, '') when the stored run's creator record may authorize it now; else (None, why).
        The record must be vouched for and fresh (creator_problem) for a new start and for a started
        run that is continued alike: a resumed run acts on its creator's authority anew."""
        try:
            creator = creator_of(run)
        except UntrustedCreator as e:
            return None, f"no trustworthy creator record: {e}"
        problem = creator_problem(run, self.now(), parse_time, self.policy_since(), self.creator_max_age)
        if problem:
            return None, f"the creator record cannot authorize this run: {problem}"
        return creator, ""

    def screen(self, run: dict, namespaces: list) -> Screening:
        """Before a run is planned (a new Execute, a DryRun): the creator record first (no
        SubjectAccessReview for a record that cannot authorize anything), then one review as the
        creator (create pods/eviction) per namespace. The namespaces refused go to the log only."""
        creator, problem = self.trusted_creator(run)
        if problem:
            return Screening(refused=problem)
        denied = {}
        for ns in namespaces:
            why = self.authorize_as(creator, [ns])
            if why:
                denied[ns] = why
        if denied:
            log.info("repackrun %s: %s may not evict in namespace(s) %s: left out of its plan",
                     ObjectView(run).name, creator.username, ", ".join(sorted(denied)))
        return Screening(denied=denied, creator=creator.username)

    # -- the run-state mark (SEC-2) --
    def state_of(self, run: dict) -> Optional[RunState]:
        """The run's mark (None when it carries none); BadStateMark when it does not verify."""
        if RUN_STATE_ANNOTATION not in ObjectView(run).annotations:
            return None
        return read_state_mark(run, self.key())

    def marker(self, run: dict) -> RunMark:
        """The engine's `mark`: RUN_STATE_ANNOTATION written on this incarnation of the run (its uid
        sealed in, and the patch's precondition), and read back verified (state_of)."""
        uid = ObjectView(run).uid

        def write(name: str, state: RunState) -> None:
            self.runs.annotate(name, RUN_STATE_ANNOTATION, control.state_mark(self.key(), uid, state), uid=uid)
        return RunMark(write=write, read=self.state_of)

    def state_problem(self, run: dict) -> str:
        """Why the engine may not evict for this run on its mark's word ('' when it may, or the run
        carries no mark): it does not verify, says the run ended, or holds another deadline."""
        try:
            state = self.state_of(run)
        except BadStateMark as e:
            return str(e)
        if state is None:
            return ""
        if state.finished:
            return f"the run ended {state.phase} ({state.reason}) (annotation {RUN_STATE_ANNOTATION})"
        return state_disagreement(run, state)
