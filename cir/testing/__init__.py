"""What a family's author tests with: the conformance suite of an environment family (:mod:`.conformance`)."""

from cir.testing.conformance import (
    CHECKS,
    ConformanceError,
    FamilyCheck,
    check_family_conformance,
    family_checks,
)

__all__ = ["CHECKS", "ConformanceError", "FamilyCheck", "check_family_conformance", "family_checks"]
