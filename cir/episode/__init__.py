"""One episode: the transcript, the harness, observation perturbations, recovery operations, features."""
