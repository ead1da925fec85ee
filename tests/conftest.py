"""Fixtures for the whole suite: a private Mosquitto broker, and hygiene checks.

Each test session starts its own broker on a free port with its own config (never a
shared one); ``set_tcp_nodelay true`` as in every config the project ships.

Every test fails if it leaves a thread, an asyncio task or a file descriptor behind
(pymodbus' autouse hygiene fixtures): a daemon that leaks one per reconnect dies in a week.

The suite runs in parallel (pytest-xdist, ``make test``: ``--dist loadgroup``), so a test
shares nothing with the tests beside it (docs/developers/tests.md):

* folders: ``tmp_path`` (a session fixture: ``tmp_path_factory``, per worker); never a
  fixed path;
* ports: ``deploy.broker.free_port()`` (or a broker fixture here), never a fixed port,
  and for a command that takes a port, one from ``free_port()`` (``lammer demo
  --web-port``);
* a session fixture is one per worker: it must be cheap to have four of;
* a module-scoped fixture (a cluster, built journals) keeps its module's tests on one
  worker (``pytest_collection_modifyitems`` below groups them), so it is built once;
* tests marked ``slow`` start first: the run is as long as its longest test.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import re
import resource
import signal
import threading
import time
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path
from typing import Any

import pluggy
import pytest
from hypothesis import HealthCheck, settings

from deploy.broker import Broker, free_port

# The shared helpers check with assert too: pytest rewrites their asserts, as a test's.
pytest.register_assert_rewrite("tests.helpers")

__all__ = ["Broker", "free_port"]

# The quick tier (``make check`` sets LAMMER_QUICK=1): the tests that need no broker, browser,
# cluster or database and take under QUICK_CPU_BUDGET of CPU, property tests with a tenth of
# their examples; ``make test`` runs every test with every example.
QUICK = os.environ.get("LAMMER_QUICK") == "1"
QUICK_LEAVES_OUT = ("service", "heavy", "slow", "exhaustive")  # the markers make check skips
QUICK_EXAMPLES = 10  # the fewest examples a property test runs in the quick tier

# No test asserts a time (bench/ measures them): hypothesis' per-example deadline (200 ms)
# and its "generation is slow" check are timings, which a loaded machine, or four workers on
# two cores, fails at random.
settings.register_profile("lammer", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "lammer-quick", settings.get_profile("lammer"), max_examples=QUICK_EXAMPLES
)
settings.load_profile("lammer-quick" if QUICK else "lammer")


def _open_fds() -> dict[str, str]:
    """Open file descriptors and what they are (the listing's own fd is closed by the
    time it is read, so it drops out)."""
    fds = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
    return fds


_SHARED_SCOPES = frozenset({"module", "class", "package"})


def _shares_a_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a fixture set up once for several tests but not per worker
    (module, class or package scope): those tests belong on one worker."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(
        fixturedef.scope in _SHARED_SCOPES
        for fixturedefs in info.name2fixturedefs.values()
        for fixturedef in fixturedefs
    )


# The fixtures that start a broker, a database, a cluster or a browser (directly or through
# another fixture): a test that uses one is marked ``service`` and stays out of ``make check``.
SERVICE_FIXTURES = frozenset(
    {
        "mosquitto",
        "mosquitto_private",
        "auth_broker",
        "web",
        "https_web",
        "browser",
        "context",
        "page",
        "make_table",
        "postgres",
        "store_db",
        "floor",
    }
)
SERVICE_MARKERS = ("service", "integration", "browser")


def _needs_a_service(item: pytest.Item) -> bool:
    """Whether the test needs a broker, browser, cluster or database (``make test`` only)."""
    if any(item.get_closest_marker(name) for name in SERVICE_MARKERS):
        return True
    return bool(SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ())))


def _start_order(item: pytest.Item) -> int:
    """Slow tests first, then the grouped modules (each a unit of one worker), then the
    rest: the longest pieces start while the short ones fill in around them."""
    if item.get_closest_marker("slow"):
        return 0
    if item.get_closest_marker("xdist_group"):
        return 1
    return 2


def _left_out_of_the_quick_tier(item: pytest.Item) -> bool:
    """Whether ``make check`` skips the test (a marker of QUICK_LEAVES_OUT)."""
    return any(item.get_closest_marker(name) for name in QUICK_LEAVES_OUT)


def _quick_examples(examples: int) -> int:
    """A property test's examples in the quick tier: a tenth, at least QUICK_EXAMPLES (and
    never more than the test asks)."""
    return min(examples, max(QUICK_EXAMPLES, examples // 10))


def _with_fewer_examples(items: list[pytest.Item]) -> None:
    """Scale the examples of the property tests that set their own ``max_examples`` (the
    others take the quick profile's), as hypothesis' own pytest plugin changes a test's
    settings: through the attribute ``@settings`` writes. Once per test function, however
    many parameters it has."""
    done: set[int] = set()
    for item in items:
        test: object = getattr(item, "obj", None)
        if not getattr(test, "is_hypothesis_test", False):
            continue
        function: Any = getattr(test, "__func__", test)
        if id(function) in done:
            continue
        done.add(id(function))
        chosen = getattr(function, "_hypothesis_internal_use_settings", None)
        if isinstance(chosen, settings) and _quick_examples(chosen.max_examples) < (
            chosen.max_examples
        ):
            quick = settings(chosen, max_examples=_quick_examples(chosen.max_examples))
            function._hypothesis_internal_use_settings = quick


@pytest.hookimpl(tryfirst=True)  # before xdist names the groups (--dist loadgroup)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the tests of a module-scoped fixture on one worker, and start the longest
    first (every worker collects the same order: the scheduler hands it out). Under make
    check, leave out the tests it skips and give property tests fewer examples."""
    for item in items:
        if _needs_a_service(item) and not item.get_closest_marker("service"):
            item.add_marker(pytest.mark.service)
        if _shares_a_fixture(item) and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    if QUICK:
        left_out = [item for item in items if _left_out_of_the_quick_tier(item)]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if not _left_out_of_the_quick_tier(item)]
        _with_fewer_examples(items)
    items.sort(key=_start_order)


# A module-wide ``pytestmark`` naming a marker make check leaves out: every test of the module
# is left out, so under make check the module is not even imported (a browser test module
# imports Playwright, 1 s of CPU on each worker for no test). Read from the source: the text
# up to such a line is parsed, so a line inside a string (a test's own small suite) is not
# taken for one, and a form this reading does not follow leaves the module collected.
_MODULE_MARKS = re.compile(r"^pytestmark\s*=\s*(\[[^\]]*\]|[^\n]*)", re.MULTILINE)
_LEFT_OUT_MARKS = frozenset((*QUICK_LEAVES_OUT, *SERVICE_MARKERS))


def _names_a_left_out_mark(statement: ast.stmt) -> bool:
    """Whether the statement assigns ``pytestmark`` a ``pytest.mark.NAME`` left out."""
    if not isinstance(statement, ast.Assign) or not any(
        isinstance(target, ast.Name) and target.id == "pytestmark" for target in statement.targets
    ):
        return False
    return any(
        isinstance(node, ast.Attribute)
        and node.attr in _LEFT_OUT_MARKS
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "mark"
        and isinstance(node.value.value, ast.Name)
        and node.value.value.id == "pytest"
        for node in ast.walk(statement.value)
    )


def _marked_whole_as_left_out(path: Path) -> bool:
    """Whether the test module's ``pytestmark`` names a marker the quick tier leaves out."""
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    for line in _MODULE_MARKS.finditer(source):
        try:
            module = ast.parse(source[: line.end()])
        except SyntaxError:  # inside a string, or a form not followed here: collect it
            continue
        if module.body and _names_a_left_out_mark(module.body[-1]):
            return True
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under make check, a test module marked whole as left out is not imported."""
    if QUICK and collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        return True if _marked_whole_as_left_out(collection_path) else None
    return None


QUICK_CPU_BUDGET = 0.5  # seconds of CPU a test of make check may use (else: mark it heavy)
# Over this a test fails under make check: three times the budget, since a loaded machine costs
# a test more CPU (a shared cache, a sibling hyperthread) and the first test of a worker that
# needs something built on first use pays for it (rules.poker's seven-card table, 0.2 to 0.5 s;
# a module's fixture, such as the journals of tests/daemon/test_verify.py, 0.7 s).
QUICK_CPU_LIMIT = 3 * QUICK_CPU_BUDGET


def _cpu_seconds() -> float:
    """CPU of this process and of the children it has reaped (a command a test ran)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Under make check, how much CPU each test used, carried to the summary."""
    if not QUICK:
        yield
        return
    start = _cpu_seconds()
    item.user_properties.append(("cpu_start", start))
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    """The teardown's report carries the test's CPU (setup, call and teardown); under make
    check, a test over QUICK_CPU_LIMIT fails there, saying to mark it heavy."""
    outcome = yield
    if call.when != "teardown" or not QUICK:
        return
    start = dict(item.user_properties).get("cpu_start")
    if not isinstance(start, float):
        return
    report = outcome.get_result()
    cpu = _cpu_seconds() - start
    report.user_properties.append(("cpu", cpu))
    if cpu > QUICK_CPU_LIMIT and report.passed:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} used {cpu:.1f} s of CPU, over make check's limit of "
            f"{QUICK_CPU_LIMIT} s (its budget is {QUICK_CPU_BUDGET} s a test): mark it "
            "@pytest.mark.heavy, and make test still runs it (tests/conftest.py)"
        )


def _cpu_of_each_test(terminalreporter: pytest.TerminalReporter) -> list[tuple[float, str]]:
    """Each test's CPU, as its teardown's report carries it (from every worker)."""
    return [
        (cpu, report.nodeid)
        for reports in terminalreporter.stats.values()
        for report in reports
        if isinstance(report, pytest.TestReport) and report.when == "teardown"
        for name, cpu in report.user_properties
        if name == "cpu" and isinstance(cpu, float)
    ]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Under make check, the CPU its tests used and those over the budget, by name."""
    if not QUICK:
        return
    each = _cpu_of_each_test(terminalreporter)
    over = sorted(entry for entry in each if entry[0] > QUICK_CPU_BUDGET)
    if over:
        terminalreporter.write_sep("-", f"over {QUICK_CPU_BUDGET} s of CPU: mark them heavy")
        for cpu, nodeid in reversed(over):
            terminalreporter.write_line(f"{cpu:5.1f} s  {nodeid}")
    terminalreporter.write_line(
        f"quick tier: {len(each)} tests, {sum(cpu for cpu, _ in each):.1f} s of CPU in the "
        f"tests (each under {QUICK_CPU_BUDGET} s; over {QUICK_CPU_LIMIT} s fails)"
    )


@pytest.fixture
async def no_leaks() -> AsyncIterator[None]:
    """Fail the test if it leaves an asyncio task running or a file descriptor open.

    Every test that runs in an event loop has it (``_no_leaks_of_any_test``), set up before,
    and checked after, every fixture of the test's own (session fixtures such as the broker
    are older and stay out of the count).
    """
    tasks = asyncio.all_tasks()
    fds = _open_fds()
    yield
    leaked_tasks: set[asyncio.Task[object]] = set()
    leaked_fds: list[str] = []
    for _ in range(200):  # closing transports and processes finish a few iterations later
        leaked_tasks = asyncio.all_tasks() - tasks - {asyncio.current_task()}
        leaked_fds = [what for fd, what in _open_fds().items() if fds.get(fd) != what]
        if not leaked_tasks and not leaked_fds:
            break
        await asyncio.sleep(0.01)
    assert not leaked_tasks, f"leaked tasks: {leaked_tasks}"
    assert not leaked_fds, f"leaked fds: {leaked_fds}"


def _runs_in_an_event_loop(item: pytest.Item) -> bool:
    """Whether the test, or a fixture it uses, is a coroutine (pytest-asyncio runs them all
    in one event loop, whose tasks ``no_leaks`` counts)."""
    if item.get_closest_marker("asyncio") or inspect.iscoroutinefunction(
        getattr(item, "function", None)
    ):
        return True
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(
        inspect.iscoroutinefunction(fixturedef.func) or inspect.isasyncgenfunction(fixturedef.func)
        for fixturedefs in info.name2fixturedefs.values()
        for fixturedef in fixturedefs
    )


@pytest.fixture(autouse=True)
def _no_leaks_of_any_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """``no_leaks`` for a test in an event loop; for any other, which can leave no task in
    an event loop of pytest's, the same check of its file descriptors without a loop (one
    set up and closed for each of 2,000 plain tests was a third of their CPU)."""
    if _runs_in_an_event_loop(request.node):
        request.getfixturevalue("no_leaks")
        yield
        return
    fds = _open_fds()
    yield
    leaked_fds: list[str] = []
    for _ in range(200):  # a process or a socket closed by another thread, a moment later
        leaked_fds = [what for fd, what in _open_fds().items() if fds.get(fd) != what]
        if not leaked_fds:
            break
        time.sleep(0.01)
    assert not leaked_fds, f"leaked fds: {leaked_fds}"


@pytest.fixture(scope="session")
def mosquitto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One private broker for the session. Do not stop it: use ``mosquitto_private``."""
    broker = Broker(tmp_path_factory.mktemp("mosquitto"))
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def mosquitto_private(tmp_path: Path) -> Iterator[Broker]:
    """A broker of the test's own, which the test may stop and start."""
    broker = Broker(tmp_path)
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session", autouse=True)
def _quick_tier_starts_no_service() -> Iterator[None]:
    """Under ``make check`` (``LAMMER_QUICK=1``), a test that starts a broker, a database or a
    cluster itself, without a fixture of ``SERVICE_FIXTURES``, fails with a sentence saying
    to mark it ``service``: the quick tier stays quick, and honest about what it left out."""
    if not QUICK:
        yield
        return
    from deploy.floor_cluster import FloorCluster
    from deploy.postgres import Postgres

    def refuse(*_args: object, **_kwargs: object) -> None:
        pytest.fail(
            "this test starts a broker, database or cluster: mark it @pytest.mark.service "
            "(make check runs only the tests that need none; make test runs them all)"
        )

    with pytest.MonkeyPatch.context() as patch:
        for owner in (Broker, Postgres, FloorCluster):
            patch.setattr(owner, "start", refuse)
        yield


CLI_BOUND_S = 180
"""Seconds a command a test runs (``lammer``, ``openssl``, ``systemd-analyze``...) may take
before it counts as hung: a bound on a failure only. At load 30 on two cores an ``lammer
odds`` run of a second took over 60 s."""


@pytest.fixture(autouse=True)
def _no_leaked_threads() -> Iterator[None]:
    """Fail a test that leaves a thread running (pymodbus' hygiene fixture)."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 10  # a thread that ends late on a loaded machine is no leak
    while True:
        leaked = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not leaked or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert not leaked, f"test leaked threads: {leaked}"


def sigint_as_from_a_terminal() -> None:
    """``preexec_fn`` for a command a test stops with Ctrl-C: SIGINT back to its default.

    A command started by a shell as a background job (``make test &``, ``( ... &)``) has
    SIGINT and SIGQUIT ignored, and so has everything it starts, the test's commands
    included: Python keeps an ignored SIGINT ignored, so ``lammer demo`` never saw the test's
    Ctrl-C (hung 180 s in two full runs started that way). A terminal's Ctrl-C reaches a
    foreground command whose SIGINT is not ignored; this makes the test's command one.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
