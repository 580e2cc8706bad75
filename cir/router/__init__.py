"""From paired evidence to a run-time decision: the CIR rule, the sequential walk, the policy, the runtime router, its evaluation."""
