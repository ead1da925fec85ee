"""Mutation testing of the money and durability paths (``make mutate``; not part of ``make test``).

Each module in ``MODULES`` is mutated by mutmut against the test files that cover it, and
nothing else: mutmut runs in a scratch copy of the tree (``.mutants/<module>/``) whose
``pyproject.toml`` carries that module's ``[tool.mutmut]`` section. mutmut forks one process
per mutant from a parent that has already imported the code and run the tests once, and runs
only the tests that reached the mutated function. Two consequences, both handled here:

* Code that runs at import (the pay tables are loaded when ``rules.paytables`` is imported)
  has already run, unmutated, in that parent, and a cache filled there hides a mutant. So
  every mutant mutmut reports as surviving is run again in a fresh interpreter with the
  mutant switched on before anything is imported (the "fresh" pass), against the tests
  mutmut saw reach its function, then, if those pass, against the module's whole list:
  mutmut credits the calls a function makes at import to whichever test first imported the
  module, so for such a function the tests it names are not all the tests that judge it.
* A mutant that makes ``mypy --strict`` fail is caught: ``make test`` runs mypy on every
  package, so such a change can never land.

The score of a module is caught / (mutants - equivalent). Equivalent mutants are listed, each
with its reason, in ``docs/developers/mutation.md`` (lines ``- `name`: reason``); a listed
name that no longer survives is reported as stale. The run fails when a module misses its goal.

    .venv/bin/python bench/mutate.py                  # every module
    .venv/bin/python bench/mutate.py rules/craps.py   # some
    .venv/bin/python bench/mutate.py --list           # the mapping, module -> test files
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from contract.software import PACKAGES

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutants"
DOC = ROOT / "docs" / "developers" / "mutation.md"
BIN = Path(sys.executable).parent

_JOURNAL_TESTS = ("tests/daemon/test_journal.py", "tests/daemon/test_segments.py")
"""The tests of the journal's parts (``daemon/journal/``, split from ``daemon/journal.py``):
the whole journal's, which reach every part through ``Journal``."""

MODULES: dict[str, tuple[str, ...]] = {
    "rules/paytables.py": (
        "tests/rules/test_paytables.py",
        "tests/rules/test_craps_paytable.py",
        "tests/rules/test_bust_bonus.py",
        "tests/rules/test_cover_all.py",
    ),
    "rules/cover_all.py": ("tests/rules/test_cover_all.py",),
    "rules/bust_bonus.py": ("tests/rules/test_bust_bonus.py",),
    "rules/craps.py": (
        "tests/rules/test_craps.py",
        "tests/rules/test_craps_paytable.py",
        "tests/rules/test_craps_replay.py",
    ),
    "rules/persistent.py": ("tests/rules/test_persistent.py", "tests/rules/test_craps.py"),
    "rules/craps_odds.py": ("tests/rules/test_craps_odds.py",),
    "rules/bust_odds.py": ("tests/rules/test_bust_odds.py",),
    "rules/blackjack.py": ("tests/rules/test_blackjack.py",),
    "rules/cards.py": ("tests/rules/test_cards.py",),
    "rules/poker.py": ("tests/rules/test_poker.py",),
    "rules/poker_round.py": ("tests/rules/test_poker_round.py",),
    "rules/table.py": ("tests/rules/test_table.py", "tests/rules/test_table_limits.py"),
    "drivers/link.py": ("tests/drivers/test_link.py",),
    "daemon/journal/facade.py": _JOURNAL_TESTS,
    "daemon/journal/store.py": _JOURNAL_TESTS,
    "daemon/journal/tip.py": _JOURNAL_TESTS,
    "daemon/journal/chain.py": _JOURNAL_TESTS,
    "daemon/journal/messages.py": _JOURNAL_TESTS,
    "daemon/journal/reader.py": _JOURNAL_TESTS,
    "daemon/journal/record.py": _JOURNAL_TESTS,
    "daemon/segments.py": ("tests/daemon/test_segments.py",),
    "daemon/disk.py": ("tests/daemon/test_disk.py",),
    "daemon/resend.py": ("tests/daemon/test_resend.py",),
    "daemon/intake.py": ("tests/daemon/test_intake.py",),  # test_mqtt.py: not in a scratch tree
    "records/integrity.py": ("tests/records/test_integrity.py", "tests/records/test_publish.py"),
    "records/intake.py": ("tests/records/test_intake.py", "tests/records/test_service_parts.py"),
    "records/service.py": (  # test_daemon_records.py: 41 s of real daemons, none needed
        "tests/records/test_service_parts.py",
        "tests/records/test_service.py",
        "tests/records/test_batches.py",
        "tests/records/test_metrics.py",
        "tests/records/test_rewrite.py",
        "tests/records/test_backfill_service.py",
        "tests/records/test_alarm_once.py",
        "tests/records/test_refused.py",
    ),
    "contract/feed.py": (  # not test_resend.py: its daemons cost 2 min a mutant, for nothing more
        "tests/contract/test_feed.py",
        "tests/contract/test_feed_edges.py",
    ),
}
"""Each mutated module and the test files that cover it (the test file that mirrors it first)."""

PYTEST_ARGS: dict[str, tuple[str, ...]] = {
    "records/integrity.py": ("-m", "not heavy"),
}
"""Arguments a module's tests run with, besides the files. The integrity watch's heavy tests
(a million honest rounds, the detection simulations: hundreds of evaluations each) take
minutes under mutmut's trampolines for every mutant they reach; its mutants are judged by
the tests of exact arithmetic beside them."""

STRICT: frozenset[str] = frozenset(
    {
        *("rules/paytables.py", "rules/cover_all.py", "rules/bust_bonus.py"),
        *("daemon/journal/facade.py", "daemon/journal/store.py", "daemon/journal/tip.py"),
        *("daemon/journal/chain.py", "daemon/journal/messages.py", "daemon/journal/reader.py"),
        "daemon/journal/record.py",
        *("daemon/disk.py", "daemon/resend.py", "daemon/intake.py", "records/integrity.py"),
        *("records/intake.py", "records/service.py", "contract/feed.py"),
    }
)
"""Modules where every non-equivalent mutant must be caught; the others need 95 %."""

GOAL = Fraction(95, 100)

# mutmut's exit codes (mutmut.stats.status_by_exit_code), folded into what the score needs.
_CAUGHT = {1: "killed", 3: "killed", 36: "timeout", 37: "mypy", -24: "timeout", 24: "timeout"}
_CAUGHT |= {152: "timeout", 255: "timeout"}
# SIGKILL: a child past its CPU limit that went on after SIGXCPU gets it one second later
# (RLIMIT_CPU's hard limit, mutmut's workers/isolation.py); mutmut names it "segfault".
_CAUGHT |= {-9: "timeout"}
_MISSED = {0: "survived", 5: "no tests", 33: "no tests"}

_EQUIVALENT = re.compile(r"^- `([\w.ǁ]+)`: (.+)$")


@dataclass
class Result:
    """One module's mutants by outcome, and how long it took."""

    module: str
    total: int = 0
    caught: dict[str, int] = field(default_factory=dict)
    equivalent: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def score(self) -> Fraction:
        """Caught over the mutants that are not equivalent."""
        real = self.total - len(self.equivalent)
        return Fraction(sum(self.caught.values()), real) if real else Fraction(1)

    @property
    def goal(self) -> Fraction:
        """What this module must reach."""
        return Fraction(1) if self.module in STRICT else GOAL


def equivalents() -> dict[str, str]:
    """The mutants docs/developers/mutation.md lists as equivalent, with their reasons."""
    found: dict[str, str] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if m := _EQUIVALENT.match(line):
            found[m.group(1)] = m.group(2)
    return found


def _tracked() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    return [p for p in out.decode().split("\0") if p and (ROOT / p).is_file()]


def _prepare(module: str, tests: tuple[str, ...]) -> Path:
    """A fresh scratch copy of the tree whose pyproject says what to mutate and test."""
    work = WORK / _dotted(module)
    shutil.rmtree(work, ignore_errors=True)
    for rel in _tracked():
        target = work / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target)
    package = module.split("/")[0]
    section = {
        "source_paths": [package],
        "only_mutate": [module],
        "pytest_add_cli_args_test_selection": list(tests),
        "pytest_add_cli_args": ["-p", "no:cacheprovider", *PYTEST_ARGS.get(module, ())],
        # mutmut copies the package and tests/ into mutants/; some tests read docs/ too
        # (the integrity watch's par sheet is compared with the one the docs publish), and
        # mypy, run there, finds the other lammer packages only as folders beside it (it does
        # not follow the editable install's import hook).
        "also_copy": ["docs", *(p for p in PACKAGES if p != package)],
        # mutmut reads mypy's report only when the command holds the word "mypy"; its
        # trampolines carry "type: ignore" comments that strict mode would flag. mypy runs
        # through ``type_check`` below, which keeps only the errors inside a mutant.
        "type_check_command": [
            *(str(BIN / "python"), str(Path(__file__).resolve()), TYPE_CHECK),
            *("mypy", module, "--output", "json", "--no-warn-unused-ignores"),
            *("--cache-dir", str(WORK / ".mypy_cache")),
        ],
    }
    lines = ["", "[tool.mutmut]"] + [f"{k} = {json.dumps(v)}" for k, v in section.items()]
    with (work / "pyproject.toml").open("a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return work


def _fresh_kill(work: Path, name: str, tests: tuple[str, ...], args: tuple[str, ...]) -> bool:
    """Whether the tests fail with ``name`` switched on before anything is imported."""
    env = dict(os.environ, MUTANT_UNDER_TEST=name, PYTHONDONTWRITEBYTECODE="1")
    env["PYTEST_ADDOPTS"] = "-p no:cacheprovider"
    run = subprocess.run(
        ["nice", "-n", "19", str(BIN / "python"), "-m", "pytest", "-x", "-q", *args, *tests],
        cwd=work / "mutants",
        env=env,
        capture_output=True,
        check=False,
    )
    return run.returncode != 0


def run_module(
    module: str,
    *,
    children: int,
    known: dict[str, str],
    reuse: bool,
    tests: tuple[str, ...] = (),
) -> Result:
    """Mutate ``module``, run its tests against each mutant, and fold the outcomes
    (``reuse``: fold the outcomes of the last run again, without running mutmut; ``tests``:
    these test files instead of the module's, for a partial run)."""
    tests = tests or MODULES[module]
    start = time.monotonic()
    work = WORK / _dotted(module) if reuse else _prepare(module, tests)
    log = work / "mutmut.log"
    with log.open("ab" if reuse else "wb") as out:
        if reuse:
            out.write(b"(reused)\n")
        else:
            subprocess.run(
                ["nice", "-n", "19", str(BIN / "mutmut"), "run", "--max-children", str(children)],
                cwd=work,
                env=dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"),
                stdout=out,
                stderr=subprocess.STDOUT,
                check=False,
            )
    meta = work / "mutants" / (module + ".meta")
    if not meta.exists():
        raise SystemExit(f"{module}: mutmut produced no results, see {log}")
    codes: dict[str, int | None] = json.loads(meta.read_text())["exit_code_by_key"]
    result = Result(module, total=len(codes))
    # Survivors not listed as equivalent get the fresh pass, ``children`` at a time.
    again = [n for n, c in codes.items() if c in _MISSED and n not in known]
    covering = _covering(work)

    args = PYTEST_ARGS.get(module, ())

    def fresh_kill(name: str) -> bool:
        first = covering.get(_function(name), tests)
        return _fresh_kill(work, name, first, args) or (
            first != tests and _fresh_kill(work, name, tests, args)
        )

    with ThreadPoolExecutor(max_workers=children) as pool:
        fresh = dict(zip(again, pool.map(fresh_kill, again), strict=True))
    for name, code in sorted(codes.items(), key=lambda kv: _order(kv[0])):
        if code in _CAUGHT:
            kind = _CAUGHT[code]
        elif code in _MISSED:
            kind = "fresh" if fresh.get(name) else ""
        else:
            result.other.append(f"{name} (exit {code})")
            continue
        if kind:
            result.caught[kind] = result.caught.get(kind, 0) + 1
        elif name in known:
            result.equivalent.append(name)
        else:
            result.missed.append(name)
    result.seconds = time.monotonic() - start
    return result


def _function(mutant: str) -> str:
    return mutant.rpartition("__mutmut_")[0]


def _covering(work: Path) -> dict[str, tuple[str, ...]]:
    """The tests mutmut saw reach each function (node ids; their files when there are many).
    A function no test reached is not listed: its mutants are run against all of the
    module's test files (so are those of a listed one whose tests pass: see the module
    docstring)."""
    stats = json.loads((work / "mutants" / "mutmut-stats.json").read_text())
    out: dict[str, tuple[str, ...]] = {}
    for function, node_ids in stats["tests_by_mangled_function_name"].items():
        if node_ids:
            ids = sorted(node_ids)
            many = len(ids) > 50
            out[function] = tuple(sorted({i.split("::")[0] for i in ids})) if many else tuple(ids)
    return out


def _dotted(module: str) -> str:
    return module.removesuffix(".py").replace("/", ".")


def _order(name: str) -> tuple[str, int]:
    base, _, n = name.rpartition("_")
    return (base, int(n) if n.isdigit() else 0)


def _diff(module: str, name: str) -> str:
    work = WORK / _dotted(module)
    shown = subprocess.run(
        [str(BIN / "mutmut"), "show", name], cwd=work, capture_output=True, text=True, check=False
    )
    return shown.stdout.strip()


TYPE_CHECK = "--type-check"
_MUTANT_DEF = re.compile(r"__mutmut_\d+$")


def type_check(command: list[str]) -> int:
    """Run mypy (``command``) for mutmut and print only its errors that lie inside a mutant.

    mutmut wraps each mutated function in a trampoline typed ``Callable[P, R]``, which loses
    what the signature says beyond that: a ``TypeGuard`` no longer narrows, so the original
    body kept beside the mutants (``contract/feed.py``'s ``_answer`` after ``_is_seq``) gets
    an error no mutant caused, and mutmut stops ("Could not find mutant for type error").
    The real tree passes ``mypy --strict``, so an error outside every mutant is the
    trampoline's: it is left out (and said on stderr); a mutant's own errors still count."""
    run = subprocess.run(
        [str(BIN / command[0]), *command[1:]], capture_output=True, text=True, check=False
    )
    spans: dict[str, list[tuple[int, int]]] = {}
    for line in run.stdout.splitlines():
        if not line.strip():
            continue
        error = json.loads(line)
        path = error["file"]
        if path not in spans:
            tree = ast.parse(Path(path).read_text(encoding="utf-8"))
            spans[path] = [
                (node.lineno, node.end_lineno or node.lineno)
                for node in ast.walk(tree)
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and _MUTANT_DEF.search(node.name)
            ]
        if any(a <= error["line"] <= b for a, b in spans[path]):
            print(line)
        else:
            print(f"not a mutant's (left out): {line}", file=sys.stderr)
    sys.stderr.write(run.stderr)
    return run.returncode


def main(argv: list[str] | None = None) -> int:
    """Run the modules asked for (all by default), print the scores; 1 if a goal is missed."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [TYPE_CHECK]:
        return type_check(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("modules", nargs="*", help="modules to mutate (default: all)")
    parser.add_argument("--list", action="store_true", help="print module -> test files")
    parser.add_argument("--children", type=int, default=2, help="mutants run at once")
    parser.add_argument(
        "--reuse", action="store_true", help="fold the last run's outcomes again (no mutmut run)"
    )
    parser.add_argument(
        "--tests",
        nargs="+",
        default=(),
        help="these test files instead of the module's (a partial run: say so)",
    )
    args = parser.parse_args(argv)
    if args.list:
        for module, tests in MODULES.items():
            print(f"{module}: {' '.join(tests)}")
        return 0
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        parser.error(f"not in MODULES: {', '.join(unknown)}")
    known = equivalents()
    results = []
    for module in args.modules or list(MODULES):
        result = run_module(
            module,
            children=args.children,
            known=known,
            reuse=args.reuse,
            tests=tuple(args.tests),
        )
        results.append(result)
        for name in result.missed:
            print(f"\n# SURVIVED {_diff(module, name)}")
        for line in result.other:
            print(f"# UNEXPECTED {module}: {line}")
        print(_row(result), flush=True)
    listed = {n for n in known if any(n.startswith(_dotted(r.module) + ".") for r in results)}
    stale = sorted(listed - {n for r in results for n in r.equivalent})
    for name in stale:
        print(f"# STALE equivalent in {DOC.relative_to(ROOT)} (not a surviving mutant now): {name}")
    print("\n| module | mutants | caught | equivalent | survived | score | goal | time |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(_row(r))
    return 0 if all(r.score >= r.goal and not r.other for r in results) and not stale else 1


def _row(r: Result) -> str:
    caught = sum(r.caught.values())
    detail = ", ".join(f"{v} {k}" for k, v in sorted(r.caught.items()))
    return (
        f"| `{r.module}` | {r.total} | {caught} ({detail}) | {len(r.equivalent)} | "
        f"{len(r.missed)} | {float(r.score):.1%} | {float(r.goal):.0%} | {r.seconds:.0f} s |"
    )


if __name__ == "__main__":
    sys.exit(main())
