"""Environment families: everything a study needs of one environment (ALFWorld is the first).

:class:`~cir.families.family.Family` is the contract, :mod:`cir.families.registry` finds a
family by name (``--family``); each built-in family is a folder here (``alfworld/``).
"""

from cir.util.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "Family": "cir.families.family",
    "get_family": "cir.families.registry",
    "family_names": "cir.families.registry",
    "make_agent": "cir.families.registry",
    "resolve_extractor": "cir.families.registry",
})
