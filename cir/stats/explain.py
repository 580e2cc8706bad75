"""Why the two arms of a pair differ: the first divergence and the mechanisms behind it.

For a paired row (task, condition, delay, operation), the no-recovery arm and the
recovery branch share every step up to the branch point. They *diverge* when the agent's
replies after it differ (in text or in number) or their outcomes differ. The mechanisms that
count are the run's environment family's agent's divergence mechanisms
(:attr:`cir.families.family.Family.mechanisms`; ALFWorld's are
:data:`cir.families.alfworld.agent.mechanisms.DIVERGENCE_MECHANISMS`): the only ways a recovery
step can change an episode of ALFWorld's built-in agent. Two readings of a divergence:

* *explained* (the instrument's check): some of them fired in the branch between the recovery
  step and the first divergent reply; for the built-in agent an unexplained divergence is a
  defect of the instrument;
* *attributed* (what caused it): a divergence is attributed only to the mechanisms that fired
  on the divergent decision itself (:data:`MECHANISM`; a ``rewind``, recorded on the recovery
  step, acts on the first decision after it, which reads the rewound context), else to the
  budget when either arm stopped on it there (:data:`BUDGET`: the arms gave the same replies
  until one ran out), else it is :data:`UNATTRIBUTED` (a mechanism that fired on an earlier
  decision whose reply happened to be the arm's, say, is not taken as the cause).

An agent that records no mechanisms (an LLM, most agents of one's own) leaves every divergence
unexplained and unattributed: the counts still say where the arms part.

With ``--samples`` K above 1 every further draw is explained too: each draw's branch against
the same draw of its arm, and each further draw of an arm against its first draw from the same
branch point (operation :data:`ANOTHER_DRAW`), where a built-in agent at a temperature parts
only by its ``sampled_choice`` mechanism.

Reads only the episode store (``episodes.jsonl.gz``), the explanation traces included, of a
run folder checked as every analysis checks it (:func:`cir.pairs.paired.check_run`: a partial
run is refused unless ``allow_partial``, another run's tasks are left out); nothing here feeds
the features or the router.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from cir.episode.transcript import AGENT, TraceEvent, Transcript
from cir.families.registry import get_family
from cir.pairs.episode_record import FACTUAL, EpisodeRecord
from cir.pairs.paired import CheckedRun, check_run, outcome_of, read_run
from cir.pairs.record import RunRecord
from cir.pairs.store import EPISODES, RunStore, StoreScan, read_episodes
from cir.util.errors import CirError

EXPLAIN_COLUMNS = [
    "task_id", "condition", "delay", "operation", "executed", "y0", "y1", "outcome", "diverged",
    "explained", "divergence_step", "mechanisms", "arm_mechanisms", "attribution", "decision_mechanisms",
    "branch_turns", "arm_turns", "branch_budget", "tail_loop",
]
#: How a divergence is attributed (``attribution``; "" where the arms do not diverge).
MECHANISM, BUDGET, UNATTRIBUTED = "mechanism", "budget", "unattributed"
ATTRIBUTIONS = (MECHANISM, BUDGET, UNATTRIBUTED)


@dataclass
class PairExplanation:
    """One pair: its arms, where they first differ and what fired from the branch on."""

    task_id: str
    condition: str
    delay: int
    operation: str
    executed: bool
    arm: Transcript | None
    branch: Transcript | None
    branch_step: int | None
    divergence: int | None = None  # index into the branch's steps (None: no divergence)
    arm_divergence: int | None = None  # the same moment in the no-recovery arm
    mechanisms: list[TraceEvent] = field(default_factory=list)  # explaining events in the branch
    arm_mechanisms: list[TraceEvent] = field(default_factory=list)  # events in the arm from the branch point
    sample: int = 0  # which draw (--samples): of the branch and of the arm it is compared with
    decision: list[TraceEvent] = field(default_factory=list)  # the events on the divergent decision
    attribution: str = ""  # MECHANISM, BUDGET or UNATTRIBUTED for a divergence

    @property
    def y0(self) -> int:
        return int(self.arm.won) if self.arm is not None else 0

    @property
    def y1(self) -> int:
        if not self.executed or self.branch is None:
            return self.y0
        return int(self.branch.won)

    @property
    def diverged(self) -> bool:
        return self.divergence is not None

    @property
    def explained(self) -> bool:
        return not self.diverged or bool(self.mechanisms)


def _agent_steps(t: Transcript, start: int) -> list[int]:
    return [i for i in range(start, len(t.steps)) if t.steps[i].actor == AGENT]


def explain_pair(task_id: str, condition: str, delay: int, operation: str, arm: Transcript,
                 branch: Transcript | None, branch_step: int | None,
                 mechanisms: frozenset[str] | None = None) -> PairExplanation:
    """The first divergence of ``branch`` from ``arm`` after ``branch_step`` and its mechanisms
    (those of ``mechanisms``, the agent's divergence mechanisms; None: ALFWorld's)."""
    if mechanisms is None:
        mechanisms = get_family().mechanisms
    ex = PairExplanation(task_id, condition, delay, operation, branch is not None, arm, branch, branch_step)
    if branch is None or branch_step is None:
        return ex
    k = branch_step
    ex.arm_mechanisms = [e for e in arm.trace if e.at >= k]
    a, b = _agent_steps(arm, k), _agent_steps(branch, k)
    first = next((j for j, (ia, ib) in enumerate(zip(a, b, strict=False))
                  if arm.steps[ia].reply != branch.steps[ib].reply), None)
    if first is None and len(a) != len(b):
        first = min(len(a), len(b))
    if first is None and arm.won != branch.won:  # pragma: no cover - same replies, same world
        first = len(b)
    if first is None:
        return ex
    ex.divergence = b[first] if first < len(b) else len(branch.steps)
    ex.arm_divergence = a[first] if first < len(a) else len(arm.steps)
    ex.mechanisms = [e for e in branch.trace
                     if e.mechanism in mechanisms and k <= e.at <= ex.divergence]
    ex.decision, ex.attribution = _attribute(ex, mechanisms)
    return ex


def _attribute(ex: PairExplanation, mechanisms: frozenset[str]) -> tuple[list[TraceEvent], str]:
    """The divergence mechanisms on the divergent decision, and the attribution they give (the
    module docstring): the branch's events recorded by that decision (a rewind's, recorded on
    the harness step just before it, acts on it); the budget when an arm stopped on it there."""
    assert ex.branch is not None and ex.arm is not None and ex.divergence is not None
    d, steps = ex.divergence, ex.branch.steps
    on = [e for e in ex.branch.trace if e.mechanism in mechanisms and e.at == d]
    # a rewind changes the context the next decision reads: its event is on the harness step
    # between that decision and the agent's step before it
    before = _last_agent_before(steps, d)
    on += [e for e in ex.branch.trace if e.mechanism == "rewind" and e.mechanism in mechanisms and before < e.at < d]
    budget = [e for e in on if e.mechanism == "budget"]
    budget += [e for e in ex.arm.trace if e.mechanism == "budget" and e.at == ex.arm_divergence
               and "budget" in mechanisms]
    named = [e for e in on if e.mechanism != "budget"]
    if named:
        return named, MECHANISM
    if budget:
        return budget, BUDGET
    return [], UNATTRIBUTED


def _last_agent_before(steps: list, d: int) -> int:
    """The index of the last agent step before step ``d`` (-1: none)."""
    return next((i for i in range(min(d, len(steps)) - 1, -1, -1) if steps[i].actor == AGENT), -1)


def tail_loop(t: Transcript, start: int = 0) -> int:
    """Env actions at the end of ``t`` (after step ``start``) that go round one or two commands
    (``A A A A``, ``A B A B``), counted from four (two rounds) up, else 0: how long an episode
    ended going in circles."""
    actions = [s.action.strip().lower() for s in t.steps[start:] if s.action is not None]
    best = 0
    for period in (1, 2):
        n = min(period, len(actions))
        while n < len(actions) and actions[-1 - n] == actions[-1 - n + period]:
            n += 1
        best = max(best, n)
    return best if best >= 4 else 0


def _transcript(ep: EpisodeRecord) -> Transcript:
    if ep.transcript is None:
        raise CirError(f"task {ep.task_id}: the {ep.role} episode of {ep.condition} has no transcript")
    return ep.transcript


def run_mechanisms(run_dir: str | Path, env: Any = None) -> frozenset[str]:
    """The divergence mechanisms of a run's agent: its family's (``env``, else the one its
    ``run.json`` names: ``env``, ALFWorld's when absent)."""
    if env is None:
        record = RunRecord.read(RunStore(run_dir))
        env = record.settings.env if record is not None else None
    return get_family(env).mechanisms


def iter_pair_explanations(run_dir: str | Path, *, task_id: str | None = None,
                           allow_partial: bool = False, env: Any = None) -> Iterator[PairExplanation]:
    """Every pair of a run (or of one task), explained, in store order; a partial run is
    refused unless ``allow_partial``; ``env``: the run's family (default: as its record says)."""
    _, _, scan = check_run(run_dir, allow_partial=allow_partial)
    return _explained(run_dir, scan, task_id, run_mechanisms(run_dir, env))


#: the ``operation`` of a pair of two draws of the same no-recovery arm (``--samples``): the
#: arm's first draw and a further one from the same branch point, a placebo of nothing
ANOTHER_DRAW = "another_draw"


def explain_draw(task_id: str, condition: str, delay: int, arm: Transcript, draw: Transcript,
                 branch_step: int, sample: int, mechanisms: frozenset[str]) -> PairExplanation:
    """Two draws of one arm from its branch point: where they part and what fired there in
    either (the agent's sampling mechanisms, which are among its divergence mechanisms)."""
    ex = explain_pair(task_id, condition, delay, ANOTHER_DRAW, arm, draw, branch_step, mechanisms)
    ex.sample = sample
    if ex.divergence is not None and ex.arm_divergence is not None:
        ex.mechanisms += [e for e in arm.trace if e.mechanism in mechanisms
                          and branch_step <= e.at <= ex.arm_divergence]
    return ex


def _explained(run_dir: str | Path, scan: StoreScan | None, task_id: str | None,
               mechanisms: frozenset[str]) -> Iterator[PairExplanation]:
    factual: dict[str, Transcript] = {}
    arms: dict[tuple[str, str], Transcript] = {}
    draws: dict[tuple[str, str, int, int], Transcript] = {}  # further draws of an arm (--samples)
    for ep in read_episodes(Path(run_dir) / EPISODES, scan):
        if task_id is not None and ep.task_id != task_id:
            continue
        if ep.role == FACTUAL:
            factual[ep.task_id] = _transcript(ep)
        elif ep.is_arm and ep.sample:
            draw = draws[(ep.task_id, ep.condition, int(ep.delay or 0), ep.sample)] = _transcript(ep)
            yield explain_draw(ep.task_id, ep.condition, int(ep.delay or 0), arms[(ep.task_id, ep.condition)],
                               draw, int(ep.branch_step or 0), ep.sample, mechanisms)
        elif ep.is_arm:
            arms[(ep.task_id, ep.condition)] = (factual[ep.task_id] if ep.same_as == FACTUAL
                                                else _transcript(ep))
        elif ep.is_branch:
            arm = (draws[(ep.task_id, ep.condition, int(ep.delay or 0), ep.sample)] if ep.sample
                   else arms[(ep.task_id, ep.condition)])
            branch = _transcript(ep) if ep.executed else None
            ex = explain_pair(ep.task_id, ep.condition, int(ep.delay or 0), str(ep.operation), arm,
                              branch, ep.branch_step, mechanisms)
            ex.sample = ep.sample
            yield ex


def explain_table(explanations: Iterable[PairExplanation]) -> pd.DataFrame:
    """One row per pair: outcome, whether the arms diverged, and the explaining mechanisms; for a
    run of ``--samples`` also each pair's ``sample``, and the pairs of two draws of one arm
    (operation :data:`ANOTHER_DRAW`: ``y1`` is the further draw's outcome)."""
    rows = []
    for ex in explanations:
        rows.append({
            "task_id": ex.task_id, "condition": ex.condition, "delay": ex.delay,
            "operation": ex.operation, "executed": ex.executed, "y0": ex.y0, "y1": ex.y1,
            "outcome": outcome_of(ex.y0, ex.y1), "diverged": ex.diverged, "explained": ex.explained,
            "divergence_step": ex.divergence if ex.divergence is not None else -1,
            "mechanisms": ",".join(sorted({e.mechanism for e in ex.mechanisms})),
            "arm_mechanisms": ",".join(sorted({e.mechanism for e in ex.arm_mechanisms})),
            "sample": ex.sample,
            "attribution": ex.attribution,
            "decision_mechanisms": ",".join(sorted({e.mechanism for e in ex.decision})),
            **_lengths(ex),
        })
    table = pd.DataFrame(rows, columns=[*EXPLAIN_COLUMNS, "sample"])
    # in the order of the pairs, not of the store (whose order of tasks follows the workers)
    table = table.sort_values(["task_id", "condition", "delay", "operation", "sample"], kind="stable",
                              ignore_index=True)
    # a run of one draw per arm: the table as it was before samples
    return table if (table["sample"] > 0).any() else table.drop(columns="sample")


def _lengths(ex: PairExplanation) -> dict[str, int | bool]:
    """Model turns of each arm from the branch point, whether the branch stopped on its budget,
    and the circles it ended in (:func:`tail_loop`, from the divergence on)."""
    k = ex.branch_step or 0
    if ex.branch is None or ex.arm is None:
        return {"branch_turns": 0, "arm_turns": 0, "branch_budget": False, "tail_loop": 0}
    turns = [sum(1 for s in t.steps[k:] if s.actor == AGENT) for t in (ex.branch, ex.arm)]
    return {"branch_turns": turns[0], "arm_turns": turns[1],
            "branch_budget": any(e.mechanism == "budget" for e in ex.branch.trace),
            "tail_loop": tail_loop(ex.branch, ex.divergence if ex.divergence is not None else k)}


def explain_run(run_dir: str | Path, allow_partial: bool = False, env: Any = None) -> pd.DataFrame:
    """:func:`explain_table` of every pair of a run folder (a partial one only if
    ``allow_partial``; ``attrs["run"]`` then says how partial, as :func:`read_paired`'s);
    ``env``: the run's family (default: as its record says)."""
    return explain_checked(read_run(run_dir, allow_partial=allow_partial), env)


def explain_checked(run: CheckedRun, env: Any = None) -> pd.DataFrame:
    """:func:`explain_run` of a run folder already read and checked (:func:`cir.pairs.paired.read_run`):
    its episodes are read, the folder is not checked again."""
    if env is None and run.record is not None:
        env = run.record.settings.family
    table = explain_table(_explained(run.run_dir, run.scan, None, run_mechanisms(run.run_dir, env)))
    table.attrs["run"] = run.table.attrs["run"]
    return table


def _named(table: pd.DataFrame) -> pd.Series:
    """Each pair's cause as a list: the mechanisms on its divergent decision, else its
    attribution (``budget``, ``unattributed``)."""
    return pd.Series([ms.split(",") if ms else [a] for ms, a in
                      zip(table["decision_mechanisms"], table["attribution"], strict=True)], index=table.index,
                     dtype=object)


def mechanism_counts(table: pd.DataFrame) -> pd.DataFrame:
    """Per operation and cause: the diverging pairs attributed to it (a mechanism on the divergent
    decision, the budget, or none: ``unattributed``), and among them rescues and harms."""
    rows = []
    for (op, ), sub in table[table["diverged"]].groupby(["operation"], sort=True):
        causes = _named(sub)
        for mech in sorted({m for ms in causes for m in ms}, key=lambda m: (m == UNATTRIBUTED, m)):
            hit = sub[causes.apply(lambda ms, m=mech: m in ms)]
            rows.append({"operation": op, "mechanism": mech, "pairs": len(hit),
                         "rescues": int((hit["outcome"] == "rescue").sum()),
                         "harms": int((hit["outcome"] == "harm").sum())})
    return pd.DataFrame(rows, columns=["operation", "mechanism", "pairs", "rescues", "harms"])


ATTRIBUTION_COLUMNS = ["operation", "pairs", "diverged", MECHANISM, BUDGET, UNATTRIBUTED,
                       "unattributed_mechanism_earlier", "unexplained"]


def attribution_split(table: pd.DataFrame) -> pd.DataFrame:
    """Per operation (and ``all``): the diverging pairs attributed to a mechanism on the
    divergent decision, to the budget, to nothing; how many of the unattributed ones had a
    mechanism fire earlier in the branch (the instrument's weaker window), and how many no
    mechanism explains at all."""
    rows = []
    for op, sub in [*table.groupby("operation", sort=True), ("all", table)]:
        d = sub[sub["diverged"]]
        un = d[d["attribution"] == UNATTRIBUTED]
        rows.append({"operation": op, "pairs": len(sub), "diverged": len(d),
                     **{a: int((d["attribution"] == a).sum()) for a in ATTRIBUTIONS},
                     "unattributed_mechanism_earlier": int((un["mechanisms"] != "").sum()),
                     "unexplained": int((~d["explained"]).sum())})
    return pd.DataFrame(rows, columns=ATTRIBUTION_COLUMNS)


HARM_COLUMNS = ["operation", "mechanism", "harms", "ended_by_budget", "steps_lost_median", "steps_lost_max",
                "ended_in_circles", "circle_median"]


def harm_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per operation and cause of a harm (the mechanisms on its divergent decision, else budget or
    unattributed): the harms, how many ended on the budget, the model turns the branch took
    beyond the arm's from the branch point (``steps_lost``: what the harm cost; the arm won),
    and how many ended going round one or two commands (:func:`tail_loop`, >= 4 env actions;
    the median length among them)."""
    harms = table[table["outcome"] == "harm"]
    rows = []
    if harms.empty:
        return pd.DataFrame(rows, columns=HARM_COLUMNS)
    causes = _named(harms)
    for op, sub in harms.groupby("operation", sort=True):
        for mech in sorted({m for ms in causes[sub.index] for m in ms}, key=lambda m: (m == UNATTRIBUTED, m)):
            hit = sub[causes[sub.index].apply(lambda ms, m=mech: m in ms)]
            lost = hit["branch_turns"] - hit["arm_turns"]
            loops = hit.loc[hit["tail_loop"] > 0, "tail_loop"]
            rows.append({"operation": op, "mechanism": mech, "harms": len(hit),
                         "ended_by_budget": int(hit["branch_budget"].sum()),
                         "steps_lost_median": float(lost.median()), "steps_lost_max": int(lost.max()),
                         "ended_in_circles": len(loops),
                         "circle_median": float(loops.median()) if len(loops) else float("nan")})
    return pd.DataFrame(rows, columns=HARM_COLUMNS)


def find_pair(run_dir: str | Path, task_id: str, condition: str, delay: int, operation: str,
              allow_partial: bool = False, env: Any = None) -> PairExplanation:
    """The explanation of one pair; a :class:`CirError` naming what was not found."""
    for ex in iter_pair_explanations(run_dir, task_id=task_id, allow_partial=allow_partial, env=env):
        if (ex.condition, ex.delay, ex.operation) == (condition, delay, operation):
            return ex
    raise CirError(f"{run_dir}: no pair for task {task_id!r}, condition {condition!r}, delay {delay}, "
                   f"operation {operation!r}")


def format_pair(ex: PairExplanation, width: int = 60) -> str:
    """The two arms side by side from the branch point, the first divergence marked."""
    k = ex.branch_step or 0
    head = (f"task {ex.task_id}  {ex.condition}  delay {ex.delay}  {ex.operation}: "
            f"y0={ex.y0} y1={ex.y1} ({outcome_of(ex.y0, ex.y1)})")
    if ex.branch is None or ex.arm is None:
        return head + "\n  the recovery did not run (the episode ended before this delay)"
    lines = [head, f"  {'no recovery':<{width}} | {ex.operation}"]

    def cell(t: Transcript, i: int) -> str:
        if i >= len(t.steps):
            return "(end: won)" if t.won else "(end)"
        s = t.steps[i]
        text = f"{i + 1:>3} {'>' if s.actor == AGENT else '#'} {s.reply if s.actor == AGENT else s.shown}"
        return text[: width - 1]

    ia, ib = k, k
    while ia < len(ex.arm.steps) or ib < len(ex.branch.steps):
        mark = "  <-- first divergence" if ib == ex.divergence else ""
        if ib < len(ex.branch.steps) and ex.branch.steps[ib].actor != AGENT:
            lines.append(f"  {'':<{width}} | {cell(ex.branch, ib)}{mark}")  # the harness step
            ib += 1
            continue
        left = cell(ex.arm, ia) if ia < len(ex.arm.steps) else ""
        right = cell(ex.branch, ib) if ib < len(ex.branch.steps) else ""
        lines.append(f"  {left:<{width}} | {right}{mark}")
        ia, ib = ia + 1, ib + 1
    lines.append(f"  {cell(ex.arm, len(ex.arm.steps)):<{width}} | {cell(ex.branch, len(ex.branch.steps))}"
                 + ("  <-- first divergence" if ex.divergence == len(ex.branch.steps) else ""))
    if not ex.diverged:
        lines.append("  the arms do not diverge")
    else:
        def named(events: list[TraceEvent]) -> str:
            return "; ".join(f"{e.mechanism} at step {e.step + 1} ({e.about})" for e in events)
        cause = {MECHANISM: f"on the divergent decision: {named(ex.decision)}",
                 BUDGET: f"the budget ({named(ex.decision)}): the arms gave the same replies until one ran out",
                 UNATTRIBUTED: "no mechanism fired on the divergent decision: unattributed"}[ex.attribution]
        lines.append(f"  first divergence at step {ex.divergence + 1}: {cause}")
        earlier = [e for e in ex.mechanisms if e not in ex.decision]
        if earlier:
            lines.append(f"  earlier in the branch: {named(earlier)}")
        elif not ex.mechanisms:
            lines.append("  NOT EXPLAINED by any mechanism since the recovery")
    return "\n".join(lines)
