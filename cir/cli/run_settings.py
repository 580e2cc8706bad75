"""The command line's options as one :class:`~cir.pairs.settings.RunSettings`: the agent, the
parallelism and how the work is kept mean the same in ``cir run`` and ``cir reproduce``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from cir.cli.llm_options import llm_config, request_limits
from cir.cli.style import family_options

if TYPE_CHECKING:  # pragma: no cover
    from cir.pairs.settings import ReplaySettings, RunSettings


def run_settings(args: argparse.Namespace, replay: ReplaySettings | None = None) -> RunSettings:
    """The settings of a run from the parsed options (checked where they are built: a bad
    value is one ``cir: error:`` line naming its option)."""
    # imported here: `cir --help` does not load the replayer's dependencies
    from cir.families.registry import DEFAULT_FAMILY
    from cir.pairs.settings import ReplaySettings, RunSettings

    return RunSettings(
        replay=replay or ReplaySettings(), agent=args.agent, seed=args.seed, base_url=args.base_url,
        llm=llm_config(args), jobs=args.jobs, backend=args.backend, scheduler=args.scheduler,
        snapshots=getattr(args, "snapshots", "fast"), family_options=family_options(args),
        restore_check=getattr(args, "restore_check", None),
        cache_dir=args.cache_dir, extend=getattr(args, "extend", None),
        family=getattr(args, "family", None) or DEFAULT_FAMILY, prompt_file=getattr(args, "prompt", None),
        requests=request_limits(args))
