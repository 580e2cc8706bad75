"""Every ``cir`` (sub)command's parser by its full name, for the tests that read the help."""

from __future__ import annotations

import argparse

from cir.cli import build_parser


def all_commands() -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command parser by its full name, e.g. 'tasks generate'."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found[f"{prefix}{name}".strip()] = sub
                    walk(sub, f"{prefix}{name} ")

    walk(build_parser(), "")
    return found
