# Two entry points do all set-up on a fresh machine: `make app` and `make test`.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8501

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[app,dev,teach,mpi]"
	touch $(STAMP)

.PHONY: app test demo install chromium simgrid notebooks
install: $(STAMP)

app: $(STAMP)
	$(VENV)/bin/streamlit run app/streamlit_app.py --server.address 127.0.0.1 --server.port $(PORT) --server.headless true --browser.gatherUsageStats false

demo: $(STAMP)
	$(VENV)/bin/dlsys simulate allreduce --algo ring --ranks 8 --size 64MiB --link tcp-10gbe

# The real-browser test drives Debian's chromium (Playwright's own browser download is not available).
chromium:
	@test -x /usr/bin/chromium || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || echo "chromium not installed: browser tests will skip"

# The flow-level network's oracle (tests/test_simgrid_oracle.py) runs Debian's SimGrid; the venv imports its one
# module by path (tests/simgrid_runner.py), so nothing is linked into the venv.
simgrid:
	@dpkg -s python3-simgrid >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-simgrid >/dev/null) || echo "python3-simgrid not installed: the SimGrid cross-check will skip"

# Executes every lesson into notebooks/ (a few minutes) and writes the student exercise notebooks.
notebooks: $(STAMP)
	$(VENV)/bin/dlsys lessons build

test: $(STAMP) chromium simgrid
	$(PY) -m pytest -q $(PYTEST_ARGS)
