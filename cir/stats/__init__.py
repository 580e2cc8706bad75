"""Statistics on a paired table: cohorts and outcome counts, the cluster bootstrap, tests, effects, joint outcomes, explanations."""
