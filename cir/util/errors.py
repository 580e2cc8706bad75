"""User-facing errors: one clear line that names the file, field or value."""


class CirError(Exception):
    """An error caused by user input or settings; the CLI prints it as one line, no traceback."""


class SettingError(CirError):
    """A setting with a value it cannot take, found where the settings are built.

    In Python the message names the setting (``max_turns 0: expected ...``); the command line
    names the option that set it instead (:meth:`as_option`: ``--max-turns 0: expected ...``).
    """

    def __init__(self, setting: str, value: object, expected: str) -> None:
        self.setting, self.value, self.expected = setting, value, expected
        super().__init__(f"{setting} {value!r}: expected {expected}")

    def as_option(self) -> str:
        return f"--{self.setting.replace('_', '-')} {self.value!r}: expected {self.expected}"
