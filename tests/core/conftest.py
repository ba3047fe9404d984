import pytest

from core_testdata import installed_wheel


@pytest.fixture(scope="session")
def wheel_bin(tmp_path_factory):
    """``bin/`` of the checkout installed as a wheel in a fresh venv, shared by the tests that run an installed zoo;
    none of them installs anything into it."""
    return installed_wheel(tmp_path_factory.mktemp("zoo-wheel"))
