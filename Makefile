# SPDX-License-Identifier: MIT
# Thin wrapper over scripts/ and cmake: `make run` and `make test` (as root on Debian 12).

BUILD_TYPE ?= RelWithDebInfo
JOBS ?= 2
CTEST_FLAGS ?= --output-on-failure
export PADDOCK_LISTEN ?= 127.0.0.1:8080
export PADDOCK_STATE_DIR ?= $(CURDIR)/.paddock

C_SOURCES = $(shell git ls-files '*.c' '*.h' 2>/dev/null || find . -path ./build -prune -o \( -name '*.c' -o -name '*.h' \) -print)

.PHONY: all deps build build-asan run test test-integration format-check format clean

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

test: deps build build-asan
	cd build && ctest $(CTEST_FLAGS)
	cd build-asan && ctest $(CTEST_FLAGS) -L 'unit|integration'

# Only the integration suite, on the normal build.
test-integration: deps build
	cd build && ctest $(CTEST_FLAGS) -L integration

format-check:
	clang-format --dry-run -Werror $(C_SOURCES)

format:
	clang-format -i $(C_SOURCES)

clean:
	rm -rf build build-asan
