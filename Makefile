VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test demo bench lint clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check svcgen tests bench
	$(VENV)/bin/mypy svcgen

test: lint
	$(VENV)/bin/pytest

demo: $(STAMP)
	$(PY) examples/demo.py

bench: $(STAMP)
	@for script in $(filter-out bench/__init__.py bench/harness.py,$(wildcard bench/*.py)); do \
		module=$$(echo $$script | sed 's|/|.|; s|\.py$$||'); echo "== $$module"; $(PY) -m $$module || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info
