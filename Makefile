# Top-level entry points; meson and ninja do the building.
#   make        install missing packages, build build/cordon
#   make demo   ... and show the boundary on a built-in demonstration
#   make test   ... and run every test (unit, then integration; the npm
#               packages the MCP tests drive are installed first)
BUILD  ?= build
SAN_BUILD ?= build-sanitize
PYTHON ?= /usr/bin/python3
# CI builds with warnings as errors.
MESON_OPTS := $(if $(CI),--werror,)

.PHONY: all deps test-deps build demo test unit integration sanitize bench clean

all: build

deps:
	@scripts/install-deps.sh

test-deps: deps
	@scripts/install-test-deps.sh

$(BUILD)/build.ninja: | deps
	meson setup $(BUILD) $(MESON_OPTS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

demo: build
	@scripts/demo.sh $(BUILD)/cordon

unit: build
	meson test -C $(BUILD) --print-errorlogs

integration: build test-deps
	CORDON_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider tests/integration

test: unit integration

# The unit and integration suites again, built with AddressSanitizer and
# UndefinedBehaviorSanitizer (dynamically linked: the sanitizers' runtimes
# do not link statically); any report fails the run.
SAN_ENV := ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 \
           UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
$(SAN_BUILD)/build.ninja: | deps
	meson setup $(SAN_BUILD) -Dstatic=false -Db_sanitize=address,undefined -Db_lundef=false \
	    $(MESON_OPTS)

sanitize: deps test-deps $(SAN_BUILD)/build.ninja
	ninja -C $(SAN_BUILD)
	$(SAN_ENV) meson test -C $(SAN_BUILD) --print-errorlogs
	$(SAN_ENV) CORDON_BUILD=$(abspath $(SAN_BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider \
	    tests/integration

bench: build
	bench/run.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(SAN_BUILD)
