#!/usr/bin/env bash
# The whole test suite: sets up what it needs and builds every binary the end-to-end tests
# start (scripts/prepare.sh), then runs every test in the workspace and prints one closing
# tally: passed, failed and skipped, with each skip's capability and reason (see
# renderpool-testkit's skip()). Extra args go to cargo test; with -p, only those crates run.
set -euo pipefail
cd "$(dirname "$0")/.."
setup_env=$(scripts/prepare.sh)
eval "$setup_env"
tests_start=$SECONDS
log=$(mktemp)
skips=$(mktemp)
trap 'rm -f "$log" "$skips"' EXIT
export RENDERPOOL_SKIP_LOG=$skips
scope=(--workspace)
for arg in "$@"; do
  case $arg in -p | -p* | --package | --package=*) scope=() ;; esac
done
status=0
# Every test binary runs even after one fails, so one run shows every failure.
cargo test --no-fail-fast "${scope[@]}" "$@" 2>&1 | tee "$log" || status=$?
# cargo ends on the last crate's doc-test line; the tally covers every test binary. A skipped
# test passed as far as cargo knows: it is counted as skipped instead.
awk -F '\t' -v skips="$skips" '
  FILENAME == skips { if (!seen[$1]++) { s++; lines = lines sprintf("skipped: %s [%s]: %s\n", $1, $2, $3) } next }
  /^test result:/ { n = split($0, w, " "); for (i = 1; i < n; i++) { if (w[i+1] ~ /^passed/) p += w[i]; if (w[i+1] ~ /^failed/) f += w[i] } }
  END { printf "tests: %d passed, %d failed, %d skipped\n%s", p - s, f, s, lines }' "$skips" "$log"
echo "test.sh: set-up and build ${tests_start}s, tests $((SECONDS - tests_start))s"
exit "$status"
