"""One episode: the transcript, the harness, observation perturbations, recovery operations, features."""

from cir.util.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "Transcript": "cir.episode.transcript",
    "Step": "cir.episode.transcript",
    "Harness": "cir.episode.harness",
    "Hook": "cir.episode.harness",
    "Condition": "cir.episode.perturb",
    "Perturbation": "cir.episode.perturb",
    "perturbation_point": "cir.episode.perturb",
    "Operation": "cir.episode.recovery",
    "get_operation": "cir.episode.recovery",
    "FeatureExtractor": "cir.episode.extractor",
    "extract": "cir.episode.extractor",
})
