#!/usr/bin/env bash
# Run every fuzz target in turn, one at a time, niced, for SECONDS_PER_TARGET
# seconds each (default 600), and append each target's final stats to
# fuzz/results.log. New inputs go to fuzz/target/work-corpus/<target>
# (ignored by git); the committed seeds in fuzz/corpus/<target> are read only.
# Crashes land in fuzz/artifacts/<target>/. Stable toolchain: no sanitizer;
# debug assertions on, so integer overflow panics as it does in tests.
#
# Usage: fuzz/run-all.sh [target...]
set -u
cd "$(dirname "$0")"
secs="${SECONDS_PER_TARGET:-600}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(dagcbor receipt_json dsse_envelope bundle note_checkpoint
           merkle_inclusion merkle_consistency tiles trust
           tlog_policy cosignature add_checkpoint tlog_proof)
fi
unset CARGO_TARGET_DIR  # cargo fuzz builds in fuzz/target
nice -n 10 cargo fuzz build --sanitizer none --debug-assertions || exit 1
mkdir -p target/logs
for t in "${targets[@]}"; do
  mkdir -p "target/work-corpus/$t" "artifacts/$t"
  log="target/logs/$t.log"
  start=$(date +%s)
  nice -n 10 cargo fuzz run --sanitizer none --debug-assertions "$t" "target/work-corpus/$t" "corpus/$t" -- \
    -max_total_time="$secs" -print_final_stats=1 -rss_limit_mb=2048 -timeout=10 \
    >"$log" 2>&1
  rc=$?
  end=$(date +%s)
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$')
  corp=$(grep -o 'corp: [0-9]*/[0-9a-zA-Z]*' "$log" | tail -1)
  crash=$(ls "artifacts/$t" | wc -l)
  printf '%s %s target=%s exit=%s seconds=%s execs=%s exec_per_sec=%s %s artifacts=%s\n' \
    "$(date -u +%FT%TZ)" "$(rustc --version | cut -d' ' -f2)" "$t" "$rc" "$((end - start))" \
    "${execs:-?}" "${rate:-?}" "${corp:-corp: ?}" "$crash" >> results.log
done
