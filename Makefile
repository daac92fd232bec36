# Top-level entry points; meson and ninja do the building.
#   make        install missing packages, build build/cordon
#   make demo   ... and show the boundary on a built-in demonstration
#   make test   ... and run every test (unit, then integration; the npm
#               packages the MCP tests drive are installed first)
#   make fuzz   build the libFuzzer targets with clang in build-fuzz and run
#               each for FUZZ_SECONDS (60); a crash fails (tests/fuzz/README.md)
#   make deb    ... and pack the build as cordon_VERSION_ARCH.deb here
#               (scripts/make-deb.sh: staged for /usr, nothing compiled again)
BUILD  ?= build
SAN_BUILD ?= build-sanitize
PYTHON ?= /usr/bin/python3
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
# CI fuzzes from a fixed seed: the same mutations each run, so a finding is
# reproducible and a green run stays green unless the code changes.
FUZZ_SEED ?= $(if $(CI),1,)
# CI builds with warnings as errors.
MESON_OPTS := $(if $(CI),--werror,)
# The isolation levels the whole integration suite runs at
# (tests/integration/levels.py), named so a level the machine lost fails
# instead of dropping out. gvisor and microvm run their own files and a named
# subset of the shared suite here; the whole suite at one of them is a run by
# hand: `make integration CORDON_LEVELS=gvisor` (or microvm: about an hour).
CORDON_LEVELS ?= namespace,process
export CORDON_LEVELS
# Each suite ends with its slowest tests, so CI's log shows where its time goes.
PYTEST_DURATIONS ?= --durations=15
# The shared suite's files that run at the gvisor and microvm levels in
# `make test` (besides each level's own test_level_*.py file).
GVISOR_SUBSET ?= tests/integration/test_runtime.py tests/integration/test_filesystem.py \
                 tests/integration/test_transparent_egress.py tests/integration/test_egress_load.py \
                 tests/integration/test_limits_held.py \
                 tests/integration/test_egress.py::test_unread_connections_hold_up_no_other
MICROVM_SUBSET ?= tests/integration/test_runtime.py tests/integration/test_transparent_egress.py \
	tests/integration/test_filesystem.py::test_root_only_files_in_the_hosts_etc_stay_unreadable \
	tests/integration/test_egress_load.py tests/integration/test_limits_held.py \
	tests/integration/test_egress.py::test_half_closed_request_still_gets_its_answer \
	tests/integration/test_egress.py::test_slow_reader_gets_the_whole_answer \
	tests/integration/test_egress.py::test_unread_connections_hold_up_no_other \
	tests/integration/test_egress.py::test_a_new_connection_is_not_cut_for_a_closed_ones_hang_up \
	tests/integration/test_egress.py::test_an_abandoned_download_is_not_relayed_on

.PHONY: all deps test-deps fuzz-deps guest-kernel build deb demo test unit integration integration-gvisor integration-microvm integration-oci conformance-oci test-gvisor fuzz sanitize sanitize-all bench clean

all: build

deps:
	@scripts/install-deps.sh

test-deps: deps
	@scripts/install-test-deps.sh

fuzz-deps: deps
	@scripts/install-deps.sh fuzz

# The microvm level's guest kernel: built once per machine (cached by the
# digest of guest/kernel.config under /var/cache/cordon/guest-kernel).
guest-kernel: deps
	@scripts/build-guest-kernel.sh >/dev/null

$(BUILD)/build.ninja: | deps
	meson setup $(BUILD) $(MESON_OPTS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

demo: build
	@scripts/demo.sh $(BUILD)/cordon

deb: build
	@scripts/make-deb.sh $(BUILD) .

unit: build
	meson test -C $(BUILD) --print-errorlogs

integration: build test-deps guest-kernel
	CORDON_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider $(PYTEST_DURATIONS) tests/integration

integration-gvisor: build test-deps
	CORDON_LEVELS=gvisor CORDON_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider $(PYTEST_DURATIONS) $(GVISOR_SUBSET)

integration-microvm: build test-deps guest-kernel
	CORDON_LEVELS=microvm CORDON_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider $(PYTEST_DURATIONS) $(MICROVM_SUBSET)

# cordon-oci under real engines (tests/oci: a private containerd, dockerd and
# Podman store, started and stopped by the tests; about two minutes).
integration-oci: build test-deps
	CORDON_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider $(PYTEST_DURATIONS) tests/oci

# By hand: crun's runtime-agnostic tests (Debian's crun source, fetched with
# apt-get source) and a subset of runc's bats tests, with OCI_RUNTIME and
# RUNC pointing at cordon-oci; the figures are in doc/oci.md.
conformance-oci: build test-deps
	tests/oci/conformance.sh $(abspath $(BUILD))

test: unit integration integration-gvisor integration-microvm integration-oci

# The whole integration suite at the gvisor level, by hand (about half an hour
# on 2 cores): CI runs tests/integration/test_level_gvisor.py as its subset.
test-gvisor: build test-deps
	CORDON_LEVELS=gvisor CORDON_BUILD=$(abspath $(BUILD)) \
	    $(PYTHON) -m pytest -q -p no:cacheprovider $(PYTEST_DURATIONS) tests/integration

# Its own build directory: clang, sanitizers and dynamic linking stay out of
# the gcc static-pie build above.
$(FUZZ_BUILD)/build.ninja: | fuzz-deps
	CC=clang meson setup $(FUZZ_BUILD) -Dfuzz=true -Dstatic=false $(MESON_OPTS)

fuzz: fuzz-deps $(FUZZ_BUILD)/build.ninja
	ninja -C $(FUZZ_BUILD) fuzz
	FUZZ_SEED=$(FUZZ_SEED) scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# The unit and integration suites again, built with AddressSanitizer and
# UndefinedBehaviorSanitizer (dynamically linked: the sanitizers' runtimes
# do not link statically); any report fails the run. At the namespace level
# only: the levels share the code the sanitizers watch, and CI's time.
SAN_ENV := ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 \
           UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# In CI a named subset: the files that drive the code reading what others
# write (policies, flags, JSON-RPC, MCP, HTTP heads, the audit log, git's
# configs) and the run path at its two main levels of detail; the levels'
# own and the slow fault-injection files run in the normal build only.
# test_install.py stages and packages the normal build; under the sanitizers
# it would only install the same code again. The daemon's load tests (many
# clients at once) are left out: two minutes of paths the others take too.
SANITIZE_SUBSET ?= $(addprefix tests/integration/,test_cli.py test_governance.py test_egress.py \
	test_mcp_wrap.py test_mcp_serve.py test_serve.py test_secrets.py test_audit.py \
	test_transactions.py test_runtime.py test_filesystem.py test_transparent_egress.py \
	test_unix_sockets.py test_git_workspace.py test_planted_links.py test_sandboxd.py) \
	-k 'not test_idle_connections_and_a_burst and not do_not_hold_up_other_clients'
# Without --werror: the instrumented build's extra warnings (format-overflow
# guesses) are not the normal build's, which CI checks with --werror.
$(SAN_BUILD)/build.ninja: | deps
	meson setup $(SAN_BUILD) -Dstatic=false -Db_sanitize=address,undefined -Db_lundef=false

sanitize: deps test-deps guest-kernel $(SAN_BUILD)/build.ninja
	ninja -C $(SAN_BUILD)
	$(SAN_ENV) meson test -C $(SAN_BUILD) --print-errorlogs
	$(SAN_ENV) CORDON_LEVELS=namespace CORDON_BUILD=$(abspath $(SAN_BUILD)) \
	    $(PYTHON) -m pytest -q -p no:cacheprovider $(PYTEST_DURATIONS) $(SANITIZE_SUBSET)

# The whole integration suite under the sanitizers, by hand (about 25 min).
sanitize-all: SANITIZE_SUBSET = tests/integration --ignore=tests/integration/test_install.py
sanitize-all: sanitize

bench: build
	bench/run.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD) $(SAN_BUILD)
