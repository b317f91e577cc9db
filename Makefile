# The two commands: `make book` (execute every page, build the site, check the numbers)
# and `make test` (unit tests + numbers check on what they computed). See README.md.
SHELL := /bin/bash
PY := .venv/bin/python
WITH_FLOWCHARTS := scripts/with_flowchart_service.sh
BUILD_ARGS ?=
PYTEST_ARGS ?=
PAGE ?=
ARGS ?=

.PHONY: venv book test check page clean browser-test bench

venv:
	@scripts/bootstrap.sh

book: venv
	@$(WITH_FLOWCHARTS) $(PY) -m trglab build $(BUILD_ARGS)
	@$(PY) -m trglab check

# pytest exit status: 0 passed, 1 some failed, 2 interrupted, 3 internal error, 4 usage error,
# 5 no tests collected; all but 0 fail `make test`. The numbers check runs either way.
test: venv
	@rm -rf _build/test-results; mkdir -p _build/test-results
	@rc=0; TRGLAB_RESULTS_DIR=$(CURDIR)/_build/test-results $(PY) -m pytest $(PYTEST_ARGS) || rc=$$?; \
	case $$rc in 0) ;; 1) echo "make test: some tests failed" >&2 ;; 5) echo "make test: pytest collected no tests" >&2 ;; \
	  *) echo "make test: pytest stopped with exit status $$rc (interrupted or usage error)" >&2 ;; esac; \
	crc=0; $(PY) -m trglab check --results _build/test-results --report _build/test-results/check.json --partial || crc=$$?; \
	[[ $$crc -eq 0 ]] || echo "make test: the numbers check found misses (table above)" >&2; \
	[[ $$rc -eq 0 && $$crc -eq 0 ]]

check: venv
	@$(PY) -m trglab check

# Re-run one page with other parameters, e.g.
#   make page PAGE=chapters/trg/ising_trg.ipynb ARGS="-p steps 8"
page: venv
	@[[ -n "$(PAGE)" ]] || { echo 'make page: say which page, e.g. make page PAGE=chapters/trg/ising_trg.ipynb ARGS="-p steps 8"' >&2; exit 2; }
	@$(WITH_FLOWCHARTS) $(PY) -m trglab page $(PAGE) $(ARGS)

# Benchmarks: tables on stdout, JSON in _build/bench/ (compare ratios within one run), e.g.
#   make bench BENCH_ARGS="--quick"
BENCH_ARGS ?=
bench: venv
	@$(PY) -m trglab.bench $(BENCH_ARGS)

# The built site in headless Debian chromium (after `make book`); screenshots in _build/screenshots/
browser-test: venv
	@$(PY) -m pytest tests/browser $(PYTEST_ARGS)

clean:
	@-[[ -x $(PY) ]] && $(PY) -m trglab.flowchart_service stop >/dev/null 2>&1; true
	rm -rf _build
