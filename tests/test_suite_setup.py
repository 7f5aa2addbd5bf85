"""The suite's own set-up (``tests/conftest.py``): the tests of the shared tiny run go to one pytest-xdist worker."""

import re
from pathlib import Path

pytest_plugins = ["pytester"]

SUITE_CONFTEST = Path(__file__).with_name("conftest.py")


def test_the_tiny_run_tests_share_one_worker(pytester, monkeypatch):
    """Under ``--dist loadgroup`` every test that uses ``tiny_project`` carries the ``@tiny_project`` group (so the
    session fixture is built on one worker only) and runs on the same worker; it failed while the suite's hook ran
    after pytest-xdist had read the marks (each worker then built the tiny run: ~35 s of CPU twice)."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # the inner run is a controller of its own
    pytester.makeconftest(SUITE_CONFTEST.read_text())
    pytester.makepyfile(
        test_grouped="""
        import pytest

        @pytest.fixture(scope="session")
        def tiny_project():
            return "run"

        @pytest.mark.parametrize("index", range(4))
        def test_plain(index):
            pass

        @pytest.mark.parametrize("index", range(4))
        def test_tiny(tiny_project, index):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=8)
    ran = re.findall(r"\[(gw\d)\] .*PASSED (\S+)", result.stdout.str())
    tiny = [(worker, test) for worker, test in ran if "test_tiny" in test]
    assert len(tiny) == 4 and all(test.endswith("@tiny_project") for _, test in tiny), ran
    assert len({worker for worker, _ in tiny}) == 1, ran
