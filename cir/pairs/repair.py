"""Repairing a run folder: the writer's job, never a reader's.

Readers (:func:`cir.pairs.paired.read_paired`, every analysis command) only read: a table
that is missing or older than the store is derived in memory, damage and another run's tasks
are refused. :func:`repair_run` (``cir repair RUN_DIR``) is the explicit repair, under the
folder's lock: the store keeps only its intact members of this run (the old file set aside,
a torn tail kept), and ``paired.csv`` and ``run.json`` are rebuilt from it, each old file kept
beside the new one (``NAME.replaced-<time>``). ``cir run`` does the same when it resumes.
Tasks a repair leaves missing are run by the same ``cir run`` command. A repair keeps a
quarantine (a failed restore check, :meth:`RunRecord.quarantine`): the rows were written with a
restore that is not exact, which no rebuild makes right.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from cir import __version__
from cir.pairs.paired import paired_text, rows_of, text_digest
from cir.pairs.record import RunRecord, foreign_member
from cir.pairs.settings import task_set_digest
from cir.pairs.store import EPISODES, RUN_JSON, RunStore
from cir.util.errors import CirError


def repair_run(run_dir: str | Path, echo: Callable[[str], None] = print) -> RunRecord:
    """Bring a run folder in line with its episode store (module docstring); the new record."""
    store = RunStore(run_dir)
    if not store.dir.is_dir() or not store.is_run():
        raise CirError(f"{store.dir}: not a run folder (no {RUN_JSON} or {EPISODES})")
    with store.lock():
        record = RunRecord.read(store)
        if record is None:
            raise CirError(f"{store.dir}: has no {RUN_JSON}, so nothing says which tasks, agent and grid "
                           "its store must hold; rerun the `cir run` command that made it")
        ids = record.task_ids
        if ids is None or task_set_digest(ids) != record.settings.task_set:
            raise CirError(f"{store.run_json_path}: its task ids do not match its settings' digest of "
                           "them (task_set), so the run's tasks are unknown; rerun the `cir run` "
                           "command that made it into a new --out folder")
        # the number of tasks is the number of the ids the digest vouches for
        record = replace(record, settings=replace(record.settings, n_tasks=len(ids)))
        _check_fits(store, record, ids)
        scan = store.open(foreign_member(record.settings, ids), record.members)
        summaries = scan.summaries()
        done = [summaries[i] for i in ids if i in summaries]
        replay = record.settings.replay
        text = paired_text(done, replay.conditions, replay.operations)
        new = RunRecord.summarize(__version__, record.settings, ids, done, record.sessions,
                                  len(done) == len(ids), record.agent_params, record.restore_failed,
                                  record.task_digests)
        new = new.with_store(store.episodes_bytes(), text_digest(text), scan.stored())
        _rewrite(store, record, new, text, echo)
    missing = len(ids) - len(done)
    quarantined = new.quarantine(store.dir)
    if quarantined:  # repaired, and still refused by every reader: say what to do instead
        echo(quarantined)
        return new
    echo(f"{store.dir}: {len(done)} of {len(ids)} tasks in the store, {new.counts.pairs} pairs"
         + (f"; {missing} task(s) missing: the same `cir run` command runs them" if missing else "; complete"))
    return new


def _check_fits(store: RunStore, record: RunRecord, ids: list[str]) -> None:
    """Refuse, changing nothing, when no task of the store fits the record: then the record is
    the one in doubt (its settings edited, or another run's), not the store."""
    scan = store.scan(foreign_member(record.settings, ids), record.members)
    if scan.foreign and not scan.members:
        raise CirError(f"{store.dir}: none of the {len(scan.foreign)} task(s) in {EPISODES} fits the "
                       f"settings of {RUN_JSON} ({scan.foreign[0].problem}); was {RUN_JSON} edited or "
                       "copied from another run? Nothing was changed")


def _rewrite(store: RunStore, old: RunRecord, new: RunRecord, text: str, echo: Callable[[str], None]) -> None:
    """The table and the record rewritten where they differ from the store's, old ones kept."""
    current = store.read_paired_text()
    if current != text:
        kept = store.replace_paired(text)
        was = "missing" if current is None else f"{rows_of(current)} rows"
        echo(f"{store.paired_path}: rebuilt from the episode store (it was {was}, the store has "
             f"{rows_of(text)}" + (f"; the old one kept as {kept.name})" if kept else ")"))
    if new.to_dict() != old.to_dict():
        kept = store.keep_copy(store.run_json_path, "replaced")
        store.write_run_json(new.to_dict())
        echo(f"{store.run_json_path}: rebuilt from the episode store (the old one kept as {kept.name})")
