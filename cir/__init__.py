"""cir: causal evaluation of recovery in LLM agent harnesses.

Data flows one way: tasks -> episodes -> paired table -> statistics / policy -> router.
The layers are folders (``util``, ``envs``, ``agents``, ``episode``, ``families``,
``pairs``, ``stats``, ``router``, ``study``, ``cli``; DESIGN.md maps them); what users
import is here, loaded on first use, so ``from cir import Router`` stays light.
"""

from cir.util.deprecation import show_former_names
from cir.util.lazy import lazy_exports

#: The release, set here only (pyproject.toml reads it; CHANGELOG.md says what each one changed).
__version__ = "0.2.0"

show_former_names()  # a former name's one warning reaches the user (cir.util.deprecation)

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    # one episode
    "Transcript": "cir.episode.transcript",
    "Step": "cir.episode.transcript",
    "Harness": "cir.episode.harness",
    "FeatureExtractor": "cir.episode.extractor",
    "REFRESH_PREFIX": "cir.episode.protocol",
    "REPLAN_TEXT": "cir.episode.protocol",
    "PLACEBO_TEXT": "cir.episode.protocol",
    "RECOVERY_CALL_PREFIX": "cir.episode.protocol",
    "MISSING_TEXT": "cir.episode.perturb",
    # framework agents (cir.adapters; each framework's adapter is imported on its own)
    "env_step": "cir.adapters.protocol",
    "FrameworkAgent": "cir.adapters.driver",
    # environments and agents
    "Env": "cir.envs.base",
    "Agent": "cir.agents.base",
    "make_agent": "cir.families.registry",
    "Family": "cir.families.family",
    "get_family": "cir.families.registry",
    "check_env": "cir.envs.check",
    "LLMPrompt": "cir.agents.prompt",
    "LLMConfig": "cir.agents.factory",
    # pairs
    "ReplaySettings": "cir.pairs.settings",
    "RunSettings": "cir.pairs.settings",
    "run_task_pairs": "cir.pairs.replay",
    "run_experiment": "cir.pairs.run",
    "repair_run": "cir.pairs.repair",
    "read_paired": "cir.pairs.paired",
    "validate_paired": "cir.pairs.paired",
    "read_episodes": "cir.pairs.store",
    "EpisodeRecord": "cir.pairs.episode_record",
    "read_task_summaries": "cir.pairs.store",
    "simulate": "cir.pairs.synthetic",
    "simulate_paired": "cir.pairs.synthetic",
    # statistics
    "decompose": "cir.stats.decompose",
    "effect_table": "cir.stats.effects",
    "contrast_table": "cir.stats.effects",
    "joint_outcomes": "cir.stats.joint",
    "joint_matrix": "cir.stats.joint",
    # policy and router
    "CIRPolicy": "cir.router.policy",
    "evaluate": "cir.router.evaluation",
    "Router": "cir.router.runtime",
    "RouterHook": "cir.router.runtime",
    "Decision": "cir.router.runtime",
    "recover_messages": "cir.router.chat",
    # the study
    "reproduce": "cir.study.reproduce",
    "plot_effects": "cir.study.figures",
    "plot_mechanisms": "cir.study.figures",
    "plot_partitions": "cir.study.figures",
    "write_figures": "cir.study.figures",
    # errors
    "CirError": "cir.util.errors",
})
