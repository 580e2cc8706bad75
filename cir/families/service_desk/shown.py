"""What a shown result is in the service desk: the true one, a visibly anomalous one, or one that
looks right and is wrong.

:func:`anomalous` is the family's answer to "does the text an agent was shown for a call look
wrong?" (the paired table's ``shown`` column; the kit's :func:`cir.tools.results.anomalous` is
the generic answer). It knows what kind of record each tool answers with, so it is stricter than
the generic rule, which can only compare identifying fields and the shapes an episode has shown
before: here the missing text, text that is not JSON, an error object, a record of another kind
(a product shown for ``get_order``) and a record of the right kind about another id (order
``W2`` shown for ``get_order(order_id="W1")``) are anomalous; a record of the right kind about the
right id, however old (``lagK``, or ``staleK`` of the same call), is not. :func:`shown_kind`
classifies a perturbed step as the paired table's column does: ``true`` when the shown text is
the true one, else ``anomalous`` or ``looks_right``; :func:`differs_in_content` tells a looks-right
result that differs only in its store times (a change's answer on an older state) from one whose
content is out of date.
"""

from __future__ import annotations

import json
import re

from cir.episode.perturb import MISSING_TEXT
from cir.families.service_desk.calls import ANSWERS, answers, call_of

TRUE, ANOMALOUS, LOOKS_RIGHT = "true", "anomalous", "looks_right"
#: the store times a record carries (when it, a refund or an exchange was made)
_STAMPS = re.compile(r'"(?:updated_at|created_at)": "[^"]*"')


def anomalous(action: str | None, shown: str) -> bool:
    """Whether ``shown``, the text shown for the call ``action`` (None: no call), visibly looks wrong
    (see the module docstring); the family's ``anomalous(action, shown)``."""
    if shown.strip() == MISSING_TEXT:
        return True
    try:
        value = json.loads(shown)
    except ValueError:
        return True
    if isinstance(value, dict) and "error" in value:
        return True
    call = call_of(action) if action else None
    if call is None or call.name not in ANSWERS:
        return False  # the agent's own bad call or finish: nothing to compare with
    return answers(call, value) != "yes"


def shown_kind(action: str, shown: str, true: str) -> str:
    """``true``, ``anomalous`` or ``looks_right`` for a step shown ``shown`` whose true result was ``true``."""
    if shown == true:
        return TRUE
    return ANOMALOUS if anomalous(action, shown) else LOOKS_RIGHT


def differs_in_content(shown: str, true: str) -> bool:
    """Whether a shown result differs from the true one in more than its store times: a ``lagK``
    answer to a change made on the state K actions earlier is the same record stamped K minutes
    earlier, which looks right and is wrong only in when the change was made."""
    return _STAMPS.sub("", shown) != _STAMPS.sub("", true)
