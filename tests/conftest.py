"""Shared pytest options."""

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--quick-dir", default=None,
                     help="output folder of `cir reproduce --quick` (for the notebook test)")


@pytest.fixture
def quick_dir(request: pytest.FixtureRequest) -> str | None:
    return request.config.getoption("--quick-dir")
