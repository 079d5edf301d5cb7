# Two entry points do all set-up on a fresh machine: `make app` and `make test`.
# `make app` installs what a teacher needs to show the app (the `app` extra); `make test` adds
# the test, teaching and MPI extras. One stamp per set, so either order installs each set once.
VENV := .venv
PY := $(VENV)/bin/python
APP_STAMP := $(VENV)/.installed-app
ALL_STAMP := $(VENV)/.installed-all
PORT ?= 8501

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(APP_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[app]"
	touch $@

$(ALL_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[app,dev,teach,mpi]"
	touch $(APP_STAMP) $@

.PHONY: app test demo install chromium simgrid notebooks
install: $(ALL_STAMP)

app: $(APP_STAMP)
	$(VENV)/bin/streamlit run app/streamlit_app.py --server.address 127.0.0.1 --server.port $(PORT) --server.headless true --browser.gatherUsageStats false

demo: $(APP_STAMP)
	$(VENV)/bin/dlsys simulate allreduce --algo ring --ranks 8 --size 64MiB --link tcp-10gbe

# The real-browser test drives Debian's chromium (Playwright's own browser download is not available).
chromium:
	@test -x /usr/bin/chromium || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || echo "chromium not installed: browser tests will skip"

# The flow-level network's oracle (tests/machine/test_simgrid_oracle.py) runs Debian's SimGrid; the venv imports its one
# module by path (tests/machine/simgrid_runner.py), so nothing is linked into the venv.
simgrid:
	@dpkg -s python3-simgrid >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-simgrid >/dev/null) || echo "python3-simgrid not installed: the SimGrid cross-check will skip"

# Executes every lesson into notebooks/ (a few minutes) and writes the student exercise notebooks.
notebooks: $(ALL_STAMP)
	$(VENV)/bin/dlsys lessons build

# The suite runs on every core (pytest-xdist, a file per worker: module fixtures such as the
# browser test's app server start once), then the `serial` tests alone: they read what
# the whole machine holds (every process of a uid, all of /dev/shm), which a parallel worker
# would add to, or bound a wall time another worker's load would stretch. Exit 5 is "no test
# selected" (a PYTEST_ARGS that picks none of them).
JOBS ?= auto
test: $(ALL_STAMP) chromium simgrid
	$(PY) -m pytest -q -n $(JOBS) --dist loadfile -m "not serial" $(PYTEST_ARGS)
	$(PY) -m pytest -q -m serial $(PYTEST_ARGS) || [ $$? -eq 5 ]
