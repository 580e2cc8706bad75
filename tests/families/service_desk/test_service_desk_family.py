"""The service-desk family: conformance, its store, tools, tickets, generator and check."""

from __future__ import annotations

import pytest

from cir.testing import family_checks


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("service-desk")


@pytest.mark.parametrize("check", family_checks("service-desk"), ids=str)
def test_the_service_desk_conforms(check, folder):
    check(folder)
