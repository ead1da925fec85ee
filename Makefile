# lammer: two commands on a fresh Debian machine with Python 3.11.
#   make demo   venv + dependencies (Mosquitto, NATS, Chromium included), then a simulated casino floor
#   make test   the same setup, then ruff, mypy (strict), the import contracts and the tests
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.lammer-installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: test demo lint typecheck bench mutate schemas setup system-deps clean

setup: system-deps $(STAMP)

# Debian packages the project needs on the machine: Mosquitto (tests start their own
# broker, never a shared one; mosquitto_passwd comes with it), nats-server (the floor
# cluster; tests start their own nodes on free ports, never Debian's service), openssl
# (the TLS tests make their own CA), Chromium (the screens' browser tests drive it through
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

# Reinstalls only when pyproject.toml changes.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
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

demo: setup
	$(BIN)/lammer demo

# The JSON Schemas of the MQTT contract in docs/schemas/, generated from the payload models
# (tests/contract/test_schemas.py fails when they are stale).
schemas: setup
	$(BIN)/python -m contract.schemas docs/schemas

bench: setup
	@for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# Mutation testing of the money and durability paths, each module against the test files
# that cover it (bench/mutate.py; scores and equivalent mutants in docs/mutation.md). Not part
# of `make test`; it runs at the lowest priority and takes long (docs/mutation.md, Scores).
# MODULES=rules/craps.py runs some of them.
mutate: setup
	nice -n 19 $(BIN)/python bench/mutate.py $(MODULES)

clean:
	rm -rf .mutants mutants $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
