#!/usr/bin/env bash
# Before/after of two rcpt binaries on the same inputs, one after the
# other (spec/performance.md "Second round: before and after"):
#
#   benches/compare.sh OLD_RCPT NEW_RCPT BENCH_DIR [ROUNDS]
#
# BENCH_DIR is an RCPT_BENCH_DIR kept by `cargo bench --bench cli` with
# RCPT_BENCH_DIR set: envelopes.jsonl, log.key, trust.json, a bundles
# directory of bundle files, and log-prove-1000000. Each command runs
# under GNU time ("wall s user+sys peak KiB"). New logs and prove outputs
# go to new directories under BENCH_DIR/compare and /dev/shm, and nothing
# is deleted between runs (see "The bench" for why deletions matter).
# Rows: append, verify (files and stream), prove --all into tmpfs and
# --range here, gate apply --log (a repository made here with git), and,
# when SERVE_BENCH names the executable `cargo bench --bench serve --no-run`
# built, log serve at 256 connections against each binary.
set -euo pipefail
old=$(realpath "$1") new=$(realpath "$2") dir=$3 rounds=${4:-3}
cd "$dir"
bundles=$(ls -d bundles*/ | head -1)
out="$dir/compare"
mkdir -p "$out"
t() { /usr/bin/time -f "%e s %U+%S %M KiB" "$@" 2>&1 >/dev/null | tail -1; }
for _ in $(seq "$rounds"); do
  for bin in "$old" "$new"; do
    log=$(mktemp -d -p "$out" log.XXXXXX)
    "$bin" log init "$log/log" --origin bench.example/log --key log.key >/dev/null 2>&1
    sync
    sleep 1
    echo "append $bin $(t "$bin" log append "$log/log" --key log.key - < envelopes.jsonl)"
  done
done
for format in human json; do
  for _ in $(seq "$rounds"); do
    for bin in "$old" "$new"; do
      echo "verify-$format $bin $(cd "$bundles" && t "$bin" verify --trust ../trust.json --format "$format" $(ls))"
    done
  done
done
# The same bundles as one JSON Lines stream on stdin (`cargo bench --bench
# cli` writes bundles-N.jsonl next to the bundles-N directory).
stream=$(ls bundles-*.jsonl 2>/dev/null | head -1 || true)
if [ -n "$stream" ]; then
  for format in human json; do
    for _ in $(seq "$rounds"); do
      for bin in "$old" "$new"; do
        echo "verify-stream-$format $bin $(t "$bin" verify --trust trust.json --format "$format" - < "$stream")"
      done
    done
  done
fi
if [ -d log-prove-1000000 ]; then
  for bin in "$old" "$new"; do
    shm=$(mktemp -d -p /dev/shm rcpt-compare.XXXXXX)
    echo "prove-all-tmpfs $bin $(t "$bin" log prove log-prove-1000000 --all --out-dir "$shm/out")"
    rm -rf "$shm"
  done
  for bin in "$old" "$new"; do
    ext=$(mktemp -d -p "$out" prove.XXXXXX)
    echo "prove-200k-here $bin $(t "$bin" log prove log-prove-1000000 --range 0..200000 --out-dir "$ext/out")"
  done
fi
# gate apply --log: a git repository of 200 files; each run applies one
# patch (each to a different file, so every patch applies to the tree the
# runs before left) with a check that does nothing (`true`), and appends
# the receipt to a log directory of that binary's own.
gate_dir=$(mktemp -d -p "$out" gate.XXXXXX)
(
  cd "$gate_dir"
  git init -q repo
  for i in $(seq 200); do echo "line $i" > "repo/f$i.txt"; done
  git -C repo add -A
  git -C repo -c user.name=b -c user.email=b@example.org commit -qm base
  echo '{"name": "ci", "checks": [{"name": "none", "run": ["true"], "timeout_s": 30}], "reads": []}' > policy.json
  for i in $(seq $((rounds * 2))); do
    echo "changed $i" >> "repo/f$i.txt"
    git -C repo diff --binary HEAD > "p$i.diff"
    git -C repo checkout -q -- .
  done
  "$new" key generate --name gate.example/compare --out gate >/dev/null 2>&1
)
run=0
for _ in $(seq "$rounds"); do
  for bin in "$old" "$new"; do
    run=$((run + 1))
    log="$gate_dir/log-$(basename "$(dirname "$(dirname "$bin")")")-$run"
    "$bin" log init "$log" --origin bench.example/gate --key log.key >/dev/null 2>&1
    echo "gate-apply-log $bin $(cd "$gate_dir/repo" && XDG_CACHE_HOME="$gate_dir/cache" t "$bin" gate apply "../p$run.diff" --policy ../policy.json --key ../gate.key -o "../r$run.json" --log "$log")"
  done
done
# log serve: `cargo bench --bench serve` against each binary
# (RCPT_BENCH_RCPT), when SERVE_BENCH names that bench's executable.
if [ -n "${SERVE_BENCH:-}" ]; then
  for bin in "$old" "$new"; do
    echo "serve $bin"
    RCPT_BENCH_RCPT="$bin" RCPT_BENCH_CLIENTS=256 RCPT_BENCH_SECONDS=5 RCPT_BENCH_SCRAPE=0 \
      "$SERVE_BENCH" --bench 2>&1 | grep -E '^\|' || true
  done
fi
