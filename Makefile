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
	$(VENV)/bin/mypy svcgen tests

# The collector tests want PostgreSQL: $$SVCGEN_TEST_POSTGRES when set, else the local server when it answers, else
# a throwaway cluster from Debian's postgresql package (installed when missing), started for the run and removed.
PG_LOCAL := postgresql://postgres@127.0.0.1:5432/postgres
PG_PORT ?= 55432
PG_DIR ?= /tmp/svcgen-test-postgres-$(PG_PORT)
# PostgreSQL refuses to run as root: as root the throwaway cluster belongs to the postgres user.
PG_AS = $$([ "$$(id -u)" = 0 ] && echo runuser -u postgres --)
PG_BIN = $$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)

# The NATS tests want a server with JetStream: $$SVCGEN_TEST_NATS when set, else the local one on 4222 when it
# answers, else a throwaway `nats-server -js` from Debian's package (installed when missing), stopped after the run.
NATS_PORT ?= 54222
NATS_DIR ?= /tmp/svcgen-test-nats-$(NATS_PORT)
REACHABLE = $(PY) -c "import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3).close()"

test: lint chromium
	@pg=; nats=; vars=; \
	if [ -z "$$SVCGEN_TEST_POSTGRES" ] && ! $(PY) -c "import psycopg; psycopg.connect('$(PG_LOCAL)', connect_timeout=3).close()" 2>/dev/null; then \
		$(MAKE) --no-print-directory postgres-start || exit 1; pg=1; \
		vars="$$vars SVCGEN_TEST_POSTGRES=postgresql://postgres@127.0.0.1:$(PG_PORT)/postgres"; \
	fi; \
	if [ -z "$$SVCGEN_TEST_NATS" ] && ! $(REACHABLE) 4222 2>/dev/null; then \
		$(MAKE) --no-print-directory nats-start || exit 1; nats=1; \
		vars="$$vars SVCGEN_TEST_NATS=nats://127.0.0.1:$(NATS_PORT)"; \
	fi; \
	env $$vars $(VENV)/bin/pytest; status=$$?; \
	[ -z "$$pg" ] || $(MAKE) --no-print-directory postgres-stop; \
	[ -z "$$nats" ] || $(MAKE) --no-print-directory nats-stop; \
	exit $$status

.PHONY: nats-start nats-stop
nats-start:
	$(call debian,nats-server,nats-server)
	@rm -rf $(NATS_DIR) && mkdir -p $(NATS_DIR)
	@echo "starting a throwaway nats-server (JetStream) on 127.0.0.1:$(NATS_PORT) in $(NATS_DIR)"
	@nats-server -a 127.0.0.1 -p $(NATS_PORT) -js -sd $(NATS_DIR)/store -l $(NATS_DIR)/nats.log -P $(NATS_DIR)/pid & \
		for i in $$(seq 50); do $(REACHABLE) $(NATS_PORT) 2>/dev/null && exit 0; sleep 0.2; done; \
		echo "nats-server did not start: see $(NATS_DIR)/nats.log" >&2; exit 1

nats-stop:
	@-[ -f $(NATS_DIR)/pid ] && kill $$(cat $(NATS_DIR)/pid)
	@rm -rf $(NATS_DIR)

.PHONY: postgres-start postgres-stop
postgres-start:
	$(call debian,pg_ctlcluster,postgresql)
	@rm -rf $(PG_DIR) && mkdir -p $(PG_DIR) && { [ "$$(id -u)" != 0 ] || chown postgres $(PG_DIR); }
	@echo "starting a throwaway PostgreSQL on 127.0.0.1:$(PG_PORT) in $(PG_DIR)"
	@$(PG_AS) $(PG_BIN)/initdb -D $(PG_DIR)/data -A trust -U postgres >$(PG_DIR)/initdb.log
	@$(PG_AS) $(PG_BIN)/pg_ctl -D $(PG_DIR)/data -l $(PG_DIR)/postgres.log -w -t 60 \
		-o "-c listen_addresses=127.0.0.1 -p $(PG_PORT) -k $(PG_DIR) -c fsync=off" start >/dev/null

postgres-stop:
	@-$(PG_AS) $(PG_BIN)/pg_ctl -D $(PG_DIR)/data -m fast -w stop >/dev/null
	@rm -rf $(PG_DIR)

# $(call debian,COMMAND,PACKAGE): install the Debian PACKAGE (apt-get, as root or through sudo) when COMMAND is
# missing. The dashboard tests drive headless Chromium; bench/serve.py loads its servers with wrk; the collector
# tests start PostgreSQL clusters of Debian's postgresql package.
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
