"""The rules of tests/conftest.py that keep make check quick and the suite clean, each run on
a small suite of its own (pytester, in this process).

The small suite's conftest takes the hooks and fixtures of tests/conftest.py by import;
``QUICK`` (LAMMER_QUICK=1 when this process started) is set for each run by monkeypatch, so
these tests say the same under make check and make test.
"""

from __future__ import annotations

from typing import IO

import pytest

from tests import conftest

pytest_plugins = ["pytester"]

# Each test runs pytest sessions of its own: 0.2 to 0.8 s of CPU in a worker that has run others.
pytestmark = pytest.mark.heavy

KEPT: list[IO[str]] = []  # what a small suite's test leaves open, closed by the test that ran it

CONFTEST = """
from tests.conftest import (
    _no_leaks_of_any_test,
    no_leaks,
    pytest_collection_modifyitems,
    pytest_ignore_collect,
    pytest_runtest_makereport,
    pytest_runtest_protocol,
)
"""
MARKERS = "\n    ".join(("heavy", "slow", "exhaustive", "service", "integration", "browser"))


class Suite:
    """A small suite under the hooks and fixtures of tests/conftest.py, run in this process
    with the quick tier on or off."""

    def __init__(self, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pytester = pytester
        self.monkeypatch = monkeypatch
        pytester.makeconftest(CONFTEST)
        pytester.makeini(
            "[pytest]\n"
            "asyncio_mode = auto\n"
            "asyncio_default_fixture_loop_scope = function\n"
            f"markers =\n    {MARKERS}\n"
        )

    def write(self, **modules: str) -> None:
        self.pytester.makepyfile(**modules)

    def run(self, *, quick: bool = False, s: bool = False) -> pytest.RunResult:
        """Run it (``s``: its prints shown)."""
        self.monkeypatch.setattr(conftest, "QUICK", quick)
        return self.pytester.runpytest_inprocess("-p", "no:cacheprovider", *(["-s"] if s else []))


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Suite:
    return Suite(pytester, monkeypatch)


def test_the_quick_tier_leaves_out_what_its_markers_say_and_runs_the_rest(suite: Suite) -> None:
    suite.write(
        test_marked="""
import pytest

def test_plain():
    pass

@pytest.mark.heavy
def test_heavy():
    pass

@pytest.mark.slow
def test_slow():
    pass

@pytest.mark.exhaustive
def test_exhaustive():
    pass

@pytest.mark.integration
def test_integration():
    pass

@pytest.mark.service
def test_service():
    pass
"""
    )
    suite.run(quick=True).assert_outcomes(passed=1, deselected=5)
    suite.run(quick=False).assert_outcomes(passed=6)


def test_a_module_marked_whole_as_left_out_is_not_even_imported_by_the_quick_tier(
    suite: Suite,
) -> None:
    suite.write(
        test_browser="""
import pytest

pytestmark = [
    pytest.mark.asyncio(loop_scope="session"),
    pytest.mark.browser,
]

raise RuntimeError("imported")

def test_page():
    pass
""",
        test_timed="""
import pytest

pytestmark = pytest.mark.timeout(60)

def test_plain():
    pass
""",
        test_quoting="""
SUITE = '''
import pytest

pytestmark = pytest.mark.heavy
'''

def test_plain():
    pass
""",
    )
    suite.run(quick=True).assert_outcomes(passed=2)
    result = suite.run(quick=False)
    result.assert_outcomes(errors=1)  # collecting it imports it, which stops the run
    result.stdout.fnmatch_lines(["*RuntimeError: imported*"])


def test_a_test_over_the_cpu_limit_fails_in_the_quick_tier_saying_to_mark_it_heavy(
    suite: Suite,
) -> None:
    suite.write(
        test_cpu="""
import time

def test_busy():
    start = time.process_time()
    while time.process_time() - start < 0.05:
        pass

def test_idle():
    pass
"""
    )
    suite.monkeypatch.setattr(conftest, "QUICK_CPU_LIMIT", 0.04)
    result = suite.run(quick=True)
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*test_busy used * s of CPU, over make check's limit*heavy*"])
    suite.run(quick=False).assert_outcomes(passed=2)


def test_property_tests_run_a_tenth_of_their_examples_in_the_quick_tier(suite: Suite) -> None:
    suite.write(
        test_property="""
import pytest
from hypothesis import given, settings, strategies as st

SEEN = {}

@pytest.mark.parametrize("case", ["a", "b"])
@settings(max_examples=120, database=None)
@given(st.integers())
def test_counted(case, n):
    SEEN[case] = SEEN.get(case, 0) + 1

def test_report():
    print("examples", sorted(SEEN.items()))
"""
    )
    result = suite.run(quick=True, s=True)
    result.assert_outcomes(passed=3)
    result.stdout.re_match_lines([r".*examples \[\('a', 12\), \('b', 12\)\]"])
    result = suite.run(quick=False, s=True)
    result.stdout.re_match_lines([r".*examples \[\('a', 120\), \('b', 120\)\]"])


def test_a_plain_test_that_leaves_a_file_open_fails(suite: Suite) -> None:
    suite.write(
        test_fd="""
import os
from tests import test_conftest_quick

def test_keeps_a_file_open():
    test_conftest_quick.KEPT.append(open(os.devnull))
"""
    )
    try:
        result = suite.run()
    finally:
        for kept in KEPT:
            kept.close()
        KEPT.clear()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*leaked fds: *'/dev/null'*"])


def test_an_async_test_that_leaves_a_task_running_fails(suite: Suite) -> None:
    suite.write(
        test_task="""
import asyncio

async def test_leaves_a_task():
    asyncio.get_running_loop().create_task(asyncio.sleep(3600), name="left")
"""
    )
    result = suite.run()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*leaked tasks:*left*"])


def test_a_plain_test_with_an_async_fixture_is_checked_for_tasks_too(suite: Suite) -> None:
    suite.write(
        test_fixture_task="""
import asyncio
import pytest

@pytest.fixture
async def started():
    asyncio.get_running_loop().create_task(asyncio.sleep(3600), name="left")

def test_plain(started):
    pass
"""
    )
    result = suite.run()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*leaked tasks:*left*"])
