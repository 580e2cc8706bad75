"""Cost of checking the episode store on resume, and of a checked read of a run folder (issue 13).

Resuming a run now checks every member of ``episodes.jsonl.gz`` on its own (gzip CRC,
then each line's JSON) so that damage is located by task; before, only the first line of
each member was parsed and the first bad member ended the scan. ``--mode old`` times the
former way (decompress all members, parse first lines: the baseline), ``--mode new``
times :meth:`cir.pairs.store.RunStore.open`'s scan, ``--mode read`` a checked ``read_paired``
of the folder (the fast path: the table's digest and every store member's size and sha256
against run.json) and ``--mode derive`` the slow path that derives the table from the store. Build the folder once, then time modes
against each other with any timer that runs two commands in turn, e.g.::

    python benchmarks/store_scan.py --build /tmp/store-bench --tasks 300
    python benchmarks/store_scan.py --dir /tmp/store-bench --mode new     # vs --mode old
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zlib
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent


def build(folder: Path, n_tasks: int) -> None:
    """A finished run of ``n_tasks`` fake tasks (the default grid; 20 run, the rest copies
    with their own ids), with its table and record."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from support.replay import fake_settings, fake_tasks

    from cir.pairs.episode_record import EpisodeRecord
    from cir.pairs.paired import paired_text, text_digest
    from cir.pairs.record import RunRecord
    from cir.pairs.run import run_experiment
    from cir.pairs.settings import task_set_digest
    from cir.pairs.store import RunStore, read_records

    seed = folder / "seed"
    record = run_experiment(fake_tasks(20), seed, fake_settings(agent="fake"), tasks_source="fake",
                            progress=False)
    tasks: dict[str, list[dict]] = {}
    for rec in read_records(seed):
        tasks.setdefault(rec["task_id"], []).append(rec)
    originals = list(tasks.values())
    store = RunStore(folder / "run")
    store.open()
    summaries, ids, members = [], [], []
    for i in range(n_tasks):
        task_id = f"task{i:05d}"
        recs = json.loads(json.dumps(originals[i % len(originals)]).replace(
            originals[i % len(originals)][0]["task_id"], task_id))
        summary = {k: v for k, v in recs[0].items() if k != "kind"}
        members.append(store.append_task(summary, [EpisodeRecord.from_dict(r) for r in recs[1:]]))
        summaries.append({"kind": "task", **summary})
        ids.append(task_id)
    replay = record.settings.replay
    text = paired_text(summaries, replay.conditions, replay.operations)
    settings = replace(record.settings, n_tasks=n_tasks, task_set=task_set_digest(ids))
    out = RunRecord.summarize(record.cir_version, settings, ids, summaries, [], True)
    store.write_run_json(out.with_store(store.episodes_bytes(), text_digest(text), members).to_dict())
    store.write_paired(text)
    size = store.episodes_bytes() / 1e6
    print(f"{folder / 'run'}: {n_tasks} tasks, store {size:.1f} MB, table {len(text) / 1e6:.1f} MB")


def open_old(path: Path) -> int:
    """The former resume scan: every member decompressed, its first line parsed."""
    data = path.read_bytes()
    view = memoryview(data)
    pos, done = 0, {}
    while pos < len(data):
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        chunk = d.decompress(view[pos:]) + d.flush()
        rec = json.loads(chunk.split(b"\n", 1)[0])
        done[rec["task_id"]] = rec
        pos = len(data) - len(d.unused_data)
    return len(done)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", type=Path, help="write a run folder here and stop")
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--dir", type=Path, help="a folder written by --build")
    parser.add_argument("--mode", choices=["old", "new", "read", "derive"], default="new")
    args = parser.parse_args()
    if args.build:
        build(args.build, args.tasks)
        return
    run = args.dir / "run"
    start = time.perf_counter()
    if args.mode == "old":
        n = open_old(run / "episodes.jsonl.gz")
    elif args.mode == "new":
        from cir.pairs.store import scan_store

        n = len(scan_store(run / "episodes.jsonl.gz").summaries())
    else:
        from cir.pairs.paired import run_table

        if args.mode == "derive":  # as after a kill between the store and the table
            record = json.loads((run / "run.json").read_text())
            record["complete"] = False
            (run / "run.json").write_text(json.dumps(record))
        try:
            text, status = run_table(run)
        finally:
            if args.mode == "derive":
                record["complete"] = True
                (run / "run.json").write_text(json.dumps(record))
        n = status["tasks_done"]
    print(f"{args.mode}: {n} tasks in {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main()
