# Every target bootstraps its own virtual environment, so any of them works as
# the first command after `git clone`.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: venv test test-fast test-all test-plain probe bench bench-tacos bench-tacos-large bench-sccl quality quality-sizes cluster-scale syccl symmetry honesty switches-reduce clean reproduce-table5

venv: $(STAMP)

# $(call make_venv,FOLDER,EXTRAS): a virtual environment in FOLDER with the package and EXTRAS
# installed editable, stamped FOLDER/.installed once everything is in
define make_venv
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found (Python >= 3.11 is required)"; exit 2; }
	$(PYTHON) -m venv $(1)
	$(1)/bin/python -m pip install --quiet --upgrade pip
	$(1)/bin/python -m pip install --quiet -e '.[$(2)]'
	@touch $(1)/.installed
endef

$(STAMP): pyproject.toml
	$(call make_venv,$(VENV),all)

# the suite on TEST_WORKERS processes (pytest-xdist), a module's tests on one worker so its fixtures run once
TEST_WORKERS ?= 2

test: $(STAMP)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadscope

# the fast tier: every test but the slow and the heavy ones (tests/conftest.py), under a minute
test-fast: $(STAMP)
	$(PY) -m pytest -q -m 'not slow and not heavy'

test-all: $(STAMP)
	$(PY) -m pytest -q -m '' -n $(TEST_WORKERS) --dist loadscope

# the fast tier on the base install, `pip install -e '.[dev]'` without the optional extras (no
# OR-Tools, no dask), in a venv of its own: what an install without extras runs, and the tests that
# need an extra skipped with their reason (-ra). CI runs it after `make test`
PLAIN_VENV  ?= .venv-plain
PLAIN_PY    := $(PLAIN_VENV)/bin/python
PLAIN_STAMP := $(PLAIN_VENV)/.installed

$(PLAIN_STAMP): pyproject.toml
	$(call make_venv,$(PLAIN_VENV),dev)

test-plain: $(PLAIN_STAMP)
	@$(PLAIN_PY) -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('ortools') is not None)" \
		|| { echo "error: OR-Tools is installed in $(PLAIN_VENV), which is meant to have the base install only (make clean)"; exit 2; }
	$(PLAIN_PY) -m pytest -q -m 'not slow and not heavy' -n $(TEST_WORKERS) --dist loadscope

bench: $(STAMP)
	$(PY) -m benchmarks.run_all

# TACOS beside its C++ reference, 16 to 4,096 NPUs (about 5 minutes; part of make bench).
# TACOS_CPP=/path/to/astra-sim/tacos (a checkout, built here once) or =/path/to/your/driver also runs
# the C++ reference here, interleaved (see benchmarks/tacos_scaling.py)
bench-tacos: $(STAMP)
	$(PY) -m benchmarks.tacos_scaling

# TACOS from 64 to 40,000 NPUs, matching only (hours: up to one hour per case; rows kept per family)
bench-tacos-large: $(STAMP)
	$(PY) -m benchmarks.tacos_large

# SCCL Table 4 rows, default backend (race) and single engines beside msccl-tools (about 15 minutes)
bench-sccl: $(STAMP)
	$(PY) -m benchmarks.sccl_backends

# hostile and careless input as whole commands under a 6 GB cap (results/bench/hostile_probe.md; about a minute)
probe: $(STAMP)
	$(PY) -m benchmarks.hostile_probe

# the best schedule against the bound from 4 KB to 1 GiB, with and without a calibrated overhead
# (results/quality_sizes/; about 30 minutes)
quality-sizes: $(STAMP)
	$(PY) -m benchmarks.quality_sizes

# efficiency and synthesis time against GPUs on rail fabrics of 32-1,024 GPUs (results/cluster_scale/; several
# hours, one cell at a time: two 1,024-GPU ForestColl cells together peak near 19 GB)
cluster-scale: $(STAMP)
	$(PY) -m workbench run experiments/cluster_scale.yaml --jobs 1

# SyCCL beside TACOS, ForestColl and the direct exchange on rail fabrics of 32 and 128 GPUs (results/syccl/; about 25 minutes)
syccl: $(STAMP)
	$(PY) -m workbench run experiments/syccl.yaml --jobs 2

# TE-CCL and TACCL with and without the symmetry decomposition, beside SyCCL (results/symmetry/; about 25 minutes)
symmetry: $(STAMP)
	$(PY) -m workbench run experiments/symmetry.yaml --jobs 2

# statuses, claims and bounds at 64 KB-16 MB on fabrics no table uses (results/honesty/; about 25 minutes)
honesty: $(STAMP)
	$(PY) -m benchmarks.honesty

# NVLS and SHARP against the same fabrics without reduction, and beside NCCL's NVLS figure (results/switches_reduce/)
switches-reduce: $(STAMP)
	$(PY) -m benchmarks.switches_reduce

# how far every formulation is from the exact optimum on the builder zoo (results/quality/)
quality: $(STAMP)
	$(PY) -m workbench run experiments/quality.yaml --jobs 2
	$(PY) -m benchmarks.forestcoll_scaling

clean:
	rm -rf $(VENV) $(PLAIN_VENV) build *.egg-info .pytest_cache

reproduce-table5: $(STAMP)
	$(PY) -m workbench run experiments/tacos_table5.yaml --fresh --jobs 2
