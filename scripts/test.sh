#!/usr/bin/env bash
# The whole test suite: sets up what it needs (scripts/setup.sh --cluster), builds every
# binary the end-to-end tests start, then runs every test in the workspace and prints one
# closing tally. Extra args go to cargo test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
eval "$(scripts/setup.sh --cluster)"
cargo build --workspace --bins
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace "$@" 2>&1 | tee "$log" || status=$?
# cargo ends on the last crate's doc-test line; the tally covers every test binary.
awk '/^test result:/ { for (i = 1; i < NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
