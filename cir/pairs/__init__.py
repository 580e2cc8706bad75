"""Pairs: the paired replayer, many tasks into a resumable run folder, the episode store, the run record, the paired table."""

from cir.util.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "ReplaySettings": "cir.pairs.settings",
    "RunSettings": "cir.pairs.settings",
    "run_task_pairs": "cir.pairs.replay",
    "TaskResult": "cir.pairs.replay",
    "run_experiment": "cir.pairs.run",
    "repair_run": "cir.pairs.repair",
    "read_episodes": "cir.pairs.store",
    "EpisodeRecord": "cir.pairs.episode_record",
    "read_task_summaries": "cir.pairs.store",
    "RunStore": "cir.pairs.store",
    "RunRecord": "cir.pairs.record",
    "read_paired": "cir.pairs.paired",
    "validate_paired": "cir.pairs.paired",
    "simulate": "cir.pairs.synthetic",
    "simulate_paired": "cir.pairs.synthetic",
})
