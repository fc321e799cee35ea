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

# $(call debian,COMMAND,PACKAGE): install the Debian PACKAGE (apt-get, as root or through sudo) when COMMAND is
# missing. The dashboard tests drive headless Chromium; bench/serve.py loads its servers with wrk.
define debian
	@command -v $(1) >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then sudo=; \
		elif command -v sudo >/dev/null 2>&1; then sudo=sudo; \
		else echo "$(1) is missing: install it as root (apt-get install -y $(2))" >&2; exit 1; fi; \
		echo "installing $(2) (apt-get)"; \
		$$sudo apt-get update && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(2); }
endef

.PHONY: chromium wrk
chromium:
	$(call debian,chromium,chromium)

wrk:
	$(call debian,wrk,wrk)

demo: $(STAMP)
	$(PY) examples/demo.py

bench: $(STAMP) wrk
	$(PY) -m bench.report

clean:
	rm -rf $(VENV) build *.egg-info
