# tollfree: top-level entry points. The real build is CMake (build/ release, build-asan/ sanitizers).
PY       ?= /usr/bin/python3
BUILD    ?= build
ASAN     ?= build-asan
FUZZ     ?= build-fuzz
TSAN     ?= build-tsan
JOBS     ?= $(shell nproc)
MAKEFLAGS += --no-print-directory
export PYTHONPATH := $(CURDIR)/python
export TOLLFREE_LIB := $(CURDIR)/$(BUILD)/libtollfree.so
export TOLLFREE_BIN := $(CURDIR)/$(BUILD)/tollfree

C_SOURCES = $(shell git ls-files -co --exclude-standard -- '*.c' '*.h' 2>/dev/null)

.PHONY: all setup build test test-c test-asan test-py format format-check demo \
        bench bench-kernel bench-orderflow bench-engine bench-orders bench-distributed bench-contention bench-strategies fuzz fuzz-smoke clean help \
        install soak tsan web

all: build

help:
	@echo "make            build build/tollfree and build/libtollfree.so"
	@echo "make demo       the default sweep, in-process from Python, against numba"
	@echo "make web        npm ci: the report's charting library (uPlot, web/package-lock.json)"
	@echo "make test       format check, C tests (release + ASan/UBSan), fuzz corpora, pytest,"
	@echo "                and a short libFuzzer run of every fuzz target"
	@echo "make bench      the boundary benchmark (build/report/)"
	@echo "make bench-kernel / bench-orderflow / bench-engine   the kernel, order-flow and engine benchmarks"
	@echo "make bench-distributed   the panel sweep in-process vs on Dask (docs/distributed.md)"
	@echo "make bench-contention    shm vs unix live sessions and batch, quiet and beside a CPU hog"
	@echo "make bench-strategies    the built-ins, a C plugin and a numba strategy against numba (docs/benchmarks.md)"
	@echo "make fuzz       build libFuzzer targets with clang (build-fuzz/fuzz/)"
	@echo "make fuzz-smoke run each fuzzer FUZZ_SECONDS (default 8) from its corpus"
	@echo "make soak       the soak and hostile suite against both servers, SOAK_SECONDS each (default 90)"
	@echo "make tsan       ThreadSanitizer build ($(TSAN)/): the C tests and a concurrent load, TSan's log checked"
	@echo "make format     clang-format every C file in place"
	@echo "make install PREFIX=DIR   the CLI, libtollfree.so, headers, tollfree.pc and docs"
	@echo "                (default PREFIX=/usr/local); Python: pip install --no-build-isolation ."

setup:
	@scripts/setup.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

$(ASAN)/CMakeCache.txt:
	cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug -DTF_SANITIZE=ON >/dev/null

test: setup build format-check fuzz-smoke test-c test-asan test-py

test-c: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: $(ASAN)/CMakeCache.txt
	cmake --build $(ASAN) -j $(JOBS)
	cd $(ASAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	    ctest --output-on-failure -j $(JOBS)

test-py: build web
	$(PY) -m pytest -q -p no:cacheprovider python/tests

# The interactive report's charting library, pinned with integrity hashes by web/package-lock.json,
# fetched into web/node_modules/ (ignored); the report inlines it into each page
# (python/tollfree/report_vendor.py; a report from a source tree fetches it itself if missing).
web: web/node_modules/uplot/package.json
web/node_modules/uplot/package.json: web/package.json web/package-lock.json
	cd web && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

# The soak and hostile suite (tests/unit/test_soak.c; ctest runs a seconds-long slice of it):
# both servers, SOAK_SECONDS each, with 200+ clients and every attack; prints the load held, the
# good client's p50/p99 and peak memory, and checks fds, threads and memory return to baseline.
SOAK_SECONDS ?= 90
soak: build
	cd $(BUILD) && TF_SOURCE_DIR=$(CURDIR) TF_BUILD_DIR=$(CURDIR)/$(BUILD) ./tests/test_soak $(SOAK_SECONDS)

# ThreadSanitizer: every C test (servers included: they are the TSan binary too, and the soak
# checks each server's log for reports), then the soak for TSAN_SOAK_SECONDS as the concurrent
# load. Left out: the allocation-counting tests (*_alloc: they define malloc themselves, which
# TSan's interceptors own) and test_kernel (its exhaustive sweeps take over 10 minutes unoptimized
# under TSan; the kernel's threads run under TSan in test_server's worker sweeps). Debug, because
# gcc 12 with -fsanitize=thread at -O1/-O2 stops on warnings in src/cli/input.c.
TSAN_SOAK_SECONDS ?= 15
TSAN_ENV = TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 exitcode=66"
tsan:
	cmake -S . -B $(TSAN) -DCMAKE_BUILD_TYPE=Debug -DTF_TSAN=ON >/dev/null
	cmake --build $(TSAN) -j $(JOBS)
	cd $(TSAN) && $(TSAN_ENV) ctest --output-on-failure -j $(JOBS) -E '_alloc$$|^test_kernel$$'
	cd $(TSAN) && $(TSAN_ENV) TF_SOURCE_DIR=$(CURDIR) TF_BUILD_DIR=$(CURDIR)/$(TSAN) \
	    ./tests/test_soak $(TSAN_SOAK_SECONDS)

format-check:
	@clang-format --dry-run --Werror $(C_SOURCES) && echo "format: ok"

format:
	clang-format -i $(C_SOURCES)

# Only what the demo runs (the library and the program), not the ~100 test and bench targets.
demo: setup $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target tollfree_shared tollfree_cli
	$(PY) -m tollfree.demo

bench-kernel: setup build
	$(PY) -m tollfree.bench_kernel
	$(BUILD)/bench/bench_kernel

bench-orderflow: setup build
	$(BUILD)/bench/bench_orderflow

# The order engine: throughput, open-loop latency, replay, snapshots (build/report/engine.json).
bench-engine: setup build
	@mkdir -p $(BUILD)/report
	$(BUILD)/bench/bench_engine $(BUILD)/report/engine.json

# Shared memory against the Unix socket, on the machine as it is and beside a CPU hog (one busy
# shell per vCPU): live sessions (one call per bar) and the batch sweep.
bench-contention: setup build
	$(PY) -m tollfree.bench.contention $(BENCH_CONTENTION_ARGS)

# The order clients (C and Python, unix/tcp round trips, pipelining) and the paper loop.
bench-orders: setup build
	$(BUILD)/bench/bench_orders
	$(PY) -m tollfree.bench_orders

# The panel sweep in-process vs Dask LocalClusters of 1 and 2 workers (BENCH_DIST_ARGS, e.g.
# --instruments 100; docs/distributed.md).
bench-distributed: setup build
	$(PY) -m tollfree.bench_distributed $(BENCH_DIST_ARGS)

# Strategies: each built-in's sweep of 1,000 combos against its numba reference, a numba strategy
# through tollfree against the same numba loop per combo, a C plugin against the same built-in.
bench-strategies: setup build
	@if [ -x $(BUILD)/bench/bench_strategies ]; then $(BUILD)/bench/bench_strategies; fi
	$(PY) -m tollfree.bench_strategies

bench: setup build
	$(PY) -m tollfree.bench

fuzz:
	CC=clang cmake -S . -B $(FUZZ) -DCMAKE_BUILD_TYPE=Debug -DTF_FUZZ=ON >/dev/null
	cmake --build $(FUZZ) -j $(JOBS)

# Each libFuzzer target for FUZZ_SECONDS from its committed corpus (new inputs go to a temp dir,
# the corpus is never modified). A crash fails the target.
FUZZ_SECONDS ?= 8
fuzz-smoke: fuzz
	@for f in $(FUZZ)/fuzz/*_libfuzzer; do \
	    n=$$(basename $$f _libfuzzer); n=$${n#fuzz_}; tmp=$$(mktemp -d); \
	    $$f -max_total_time=$(FUZZ_SECONDS) -error_exitcode=1 -print_final_stats=0 \
	        $$tmp tests/fuzz/corpus/$$n > $(FUZZ)/$$n.log 2>&1 \
	        || { tail -40 $(FUZZ)/$$n.log; rm -rf $$tmp; exit 1; }; \
	    echo "fuzz $$n: $$(grep -o 'Done [0-9]* runs in [0-9]* second' $(FUZZ)/$$n.log), no crash"; \
	    rm -rf $$tmp; \
	done
# The CLI, libtollfree.so.0.3 (SONAME + version), include/tollfree/, lib/pkgconfig/tollfree.pc,
# share/doc/tollfree/ and the Python package for `sweep --report` (CMakeLists.txt).
PREFIX ?= /usr/local
install: build web
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN) $(FUZZ) $(TSAN)
