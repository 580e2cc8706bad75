"""User-facing errors: one clear line that names the file, field or value."""


class CirError(Exception):
    """An error caused by user input or settings; the CLI prints it as one line, no traceback."""


class SettingError(CirError):
    """A setting with a value it cannot take, found where the settings are built.

    In Python the message names the setting (``max_turns 0: expected ...``), or the item of a
    list setting (``delay -1: expected ...``); the command line names the option that set it
    instead (:meth:`as_option`: ``--max-turns 0: expected ...``, ``--delays: delay -1: ...``).
    """

    def __init__(self, setting: str, value: object, expected: str, item: str | None = None) -> None:
        self.setting, self.value, self.expected, self.item = setting, value, expected, item
        super().__init__(f"{item or setting} {value!r}: expected {expected}")

    def as_option(self) -> str:
        option = "--" + self.setting.replace("_", "-")
        return f"{option}: {self}" if self.item else f"{option} {self.value!r}: expected {self.expected}"


class CirValueError(CirError, ValueError):
    """A value given in Python that cannot be taken (a budget, a delay, an array's shape, a
    hyperparameter of :class:`~cir.router.policy.CIRPolicy`): a CirError that is also a
    ``ValueError``, as scikit-learn's conventions and callers that catch ValueError expect."""


class CirTypeError(CirError, TypeError):
    """An object that lacks what it must have (an env without ``cursor()``): a CirError that is
    also a ``TypeError``."""


class ReplayError(CirError):
    """The two arms of a pair are not identical up to the branch point (:mod:`cir.pairs.replay`)."""


class RestoreError(ReplayError):
    """An env's restore is not exact: a restored state answered otherwise than the original
    (the replayer's restore check, :mod:`cir.pairs.replay`), or its content is not the content
    the snapshot recorded (a tool world's digest check, :mod:`cir.tools.state`). A run that meets
    one is quarantined (:mod:`cir.pairs.run`); ``check_env`` reports one as a failure.

    ``failure`` holds the parts as plain data (task, the state's env action count, the action
    sent, both answers; or the task and what differs), for the run record that quarantines the
    run folder."""

    def __init__(self, message: str, failure: dict | None = None) -> None:
        super().__init__(message)
        self.failure = dict(failure or {})
