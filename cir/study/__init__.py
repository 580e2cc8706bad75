"""The study end to end: experiment configs, reproduce, the report, its findings and figures."""
