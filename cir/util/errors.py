"""User-facing errors: one clear line that names the file, field or value."""


class CirError(Exception):
    """An error caused by user input or settings; the CLI prints it as one line, no traceback."""
