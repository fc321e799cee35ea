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
	$(VENV)/bin/ruff check svcgen tests bench examples
	$(VENV)/bin/mypy svcgen

test: lint chromium
	$(VENV)/bin/pytest

# The dashboard tests drive headless Chromium; install it (Debian package) when it is missing.
.PHONY: chromium
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then sudo=; \
		elif command -v sudo >/dev/null 2>&1; then sudo=sudo; \
		else echo "chromium is missing: install it as root (apt-get install -y chromium)" >&2; exit 1; fi; \
		echo "installing chromium (apt-get)"; \
		$$sudo apt-get update && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium; }

demo: $(STAMP)
	$(PY) examples/demo.py

bench: $(STAMP)
	$(PY) -m bench.report

clean:
	rm -rf $(VENV) build *.egg-info
