# SPDX-License-Identifier: MIT
# Thin wrapper over scripts/ and cmake: `make run` and `make test` (as root on Debian 12).

BUILD_TYPE ?= RelWithDebInfo
JOBS ?= 2
CTEST_FLAGS ?= --output-on-failure
export PADDOCK_LISTEN ?= 127.0.0.1:8080
export PADDOCK_STATE_DIR ?= $(CURDIR)/.paddock

C_SOURCES = $(shell git ls-files '*.c' '*.h' 2>/dev/null || find . -path ./build -prune -o \( -name '*.c' -o -name '*.h' \) -print)

.PHONY: all deps build build-asan run test test-integration format-check format clean bench

all: build

deps:
	scripts/deps.sh

build:
	cmake -S . -B build -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)
	cmake --build build -j$(JOBS)

build-asan:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DPADDOCK_SANITIZE=ON
	cmake --build build-asan -j$(JOBS)

run: deps build
	scripts/run.sh

test: deps format-check build build-asan
	cd build && ctest $(CTEST_FLAGS)
	# The sanitizer pass: everything that runs paddock's own binaries (the package tests
	# build and install their own, so they run once, above).
	cd build-asan && ctest $(CTEST_FLAGS) -L 'unit|integration|fuzz-replay|sandbox' \
		-E 'package_|systemd_units'

# Only the integration suite, on the normal build.
test-integration: deps build
	cd build && ctest $(CTEST_FLAGS) -L integration

# Benchmarks: a release build of its own, the bench programs, every row with its floor
# measured in the same run; each run's results in $(BENCH_BUILD)/bench-results/, and a run of
# every row replaces bench/results/latest.{md,json,png}. BENCH_FLAGS e.g. --density 1000.
BENCH_BUILD ?= build-bench
BENCH_FLAGS ?=
bench: deps
	cmake -S . -B $(BENCH_BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BENCH_BUILD) -j$(JOBS) --target paddock-sessiond paddock-fcgi paddock-init
	cmake -S bench -B $(BENCH_BUILD)/bench -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BENCH_BUILD)/bench -j$(JOBS)
	/usr/bin/python3 bench/run_bench.py --build $(BENCH_BUILD) $(BENCH_FLAGS)

# Packages: the Debian package (debhelper + cmake) and the RPM (rpmbuild, --nodeps off
# RPM hosts). Output dirs may be set: make deb DEB_OUT=/tmp/deb
DEB_OUT ?= $(CURDIR)/build-deb
RPM_OUT ?= $(CURDIR)/build-rpm
.PHONY: deb rpm
deb:
	packaging/deb/build.sh $(CURDIR) $(DEB_OUT)

rpm:
	packaging/rpm/build.sh $(CURDIR) $(RPM_OUT)

format-check:
	clang-format --dry-run -Werror $(C_SOURCES)

format:
	clang-format -i $(C_SOURCES)

clean:
	rm -rf build build-asan

# libFuzzer targets (clang, ASan+UBSan) in build-fuzz, each run FUZZ_SECONDS on its corpus;
# what they find lands in build-fuzz/fuzz-work and build-fuzz/fuzz-crashes.
.PHONY: fuzz
FUZZ_SECONDS ?= 60
FUZZ_BUILD ?= build-fuzz
fuzz: deps
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPADDOCK_FUZZ=ON
	cmake --build $(FUZZ_BUILD) -j$(JOBS)
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)
