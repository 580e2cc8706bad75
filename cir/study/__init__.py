"""The study end to end: experiment configs, reproduce, the report, its findings and figures."""

from cir.util.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "load_experiments": "cir.study.experiments",
    "Experiment": "cir.study.experiments",
    "reproduce": "cir.study.reproduce",
    "StudySettings": "cir.study.reproduce",
    "write_study_report": "cir.study.report",
    "plot_effects": "cir.study.figures",
    "plot_mechanisms": "cir.study.figures",
    "plot_partitions": "cir.study.figures",
    "plot_joint": "cir.study.figures",
    "write_figures": "cir.study.figures",
})

# ``reproduce`` is both an exported function and a module of this package: bound here, once, so that
# importing the module (which sets the package's attribute to it) never shadows the function
from cir.study.reproduce import reproduce as reproduce  # noqa: E402
