#!/bin/sh
# Runs every libFuzzer target in BUILD (configured with -Dfuzz=true) for
# SECONDS each, one after the other (each keeps a core busy), starting from
# the seeds in tests/fuzz/corpus/<target>/ plus what earlier runs in BUILD
# found. Prints the executions per target; a crash, leak, timeout or trap
# fails the run and leaves the input in BUILD/fuzz-artifacts/ for replay:
#   BUILD/fuzz_<target> BUILD/fuzz-artifacts/<target>-crash-...
#   scripts/fuzz.sh [BUILD [SECONDS]]     (defaults: build-fuzz 60)
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build-fuzz}
SECONDS_EACH=${2:-60}

# Inputs past these lengths only slow the search: an HTTP head may run to
# 16 KiB, an audit log needs a few lines to reach the chain checks.
max_len() {
    case $1 in
        http | synth) echo 20000 ;;
        audit) echo 8192 ;;
        *) echo 4096 ;;
    esac
}

mkdir -p "$BUILD/fuzz-artifacts"
failed=""
for t in url http broker policy audit synth gitconfig; do
    corpus=$BUILD/fuzz-corpus/$t
    log=$BUILD/fuzz-artifacts/$t.log
    mkdir -p "$corpus"
    # The committed seeds stay as they are; libFuzzer adds to the copy.
    cp tests/fuzz/corpus/$t/* "$corpus/"
    rc=0
    "$BUILD/fuzz_$t" -max_total_time="$SECONDS_EACH" -max_len="$(max_len $t)" \
        -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 ${FUZZ_SEED:+-seed=$FUZZ_SEED} \
        -artifact_prefix="$BUILD/fuzz-artifacts/$t-" "$corpus" >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    inputs=$(ls "$corpus" | wc -l)
    if [ "$rc" -ne 0 ]; then
        echo "fuzz_$t: FAILED (exit $rc) after ${execs:-?} executions; $log:" >&2
        grep -E 'ERROR|SUMMARY|^ +#[0-9]+ .* in |Test unit written' "$log" | head -20 >&2
        failed="$failed $t"
    else
        echo "fuzz_$t: ${execs:-?} executions in ${SECONDS_EACH} s, corpus $inputs inputs"
    fi
done
if [ -n "$failed" ]; then
    echo "fuzz: failed:$failed" >&2
    exit 1
fi
