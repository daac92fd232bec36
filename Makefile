# Top-level entry points; meson and ninja do the building.
#   make        install missing packages, build build/cordon
#   make demo   ... and show the boundary on a built-in demonstration
#   make test   ... and run every test (unit, then integration; the npm
#               packages the MCP tests drive are installed first)
BUILD  ?= build
PYTHON ?= /usr/bin/python3
# CI builds with warnings as errors.
MESON_OPTS := $(if $(CI),--werror,)

.PHONY: all deps test-deps build demo test unit integration bench clean

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

bench: build
	bench/run.sh $(BUILD)

clean:
	rm -rf $(BUILD)
