"""Why the two arms of a pair differ: the first divergence and the mechanisms behind it.

For a paired row (task, condition, delay, operation), the no-recovery arm and the
recovery branch share every step up to the branch point. They *diverge* when the agent's
replies after it differ (in text or in number) or their outcomes differ. A divergence is
*explained* by the mechanisms of the run's environment family's agent
(:attr:`cir.families.family.Family.mechanisms`; ALFWorld's are
:data:`cir.families.alfworld.agent.mechanisms.DIVERGENCE_MECHANISMS`) that fired in the branch
between the recovery step and the first divergent reply (for a branch that stopped early, its
budget); those are the only ways a recovery step can change an episode of ALFWorld's built-in
agent, where an unexplained divergence is a defect of the instrument. An agent that records
no mechanisms (an LLM, most agents of one's own) leaves every divergence unexplained: the
counts still say where the arms part.

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
    "explained", "divergence_step", "mechanisms", "arm_mechanisms",
]


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
    return ex


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
        })
    table = pd.DataFrame(rows, columns=[*EXPLAIN_COLUMNS, "sample"])
    # a run of one draw per arm: the table as it was before samples
    return table if (table["sample"] > 0).any() else table.drop(columns="sample")


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


def mechanism_counts(table: pd.DataFrame) -> pd.DataFrame:
    """Per operation and mechanism: the pairs it explains, and among them rescues and harms."""
    rows = []
    for (op, ), sub in table[table["diverged"]].groupby(["operation"], sort=True):
        for mech in sorted({m for ms in sub["mechanisms"] for m in ms.split(",") if m}):
            hit = sub[sub["mechanisms"].str.split(",").apply(lambda ms, m=mech: m in ms)]
            rows.append({"operation": op, "mechanism": mech, "pairs": len(hit),
                         "rescues": int((hit["outcome"] == "rescue").sum()),
                         "harms": int((hit["outcome"] == "harm").sum())})
    return pd.DataFrame(rows, columns=["operation", "mechanism", "pairs", "rescues", "harms"])


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
        causes = "; ".join(f"{e.mechanism} at step {e.step + 1} ({e.about})" for e in ex.mechanisms)
        lines.append(f"  first divergence at step {ex.divergence + 1}: "
                     f"{causes if causes else 'NOT EXPLAINED by any mechanism'}")
    return "\n".join(lines)
