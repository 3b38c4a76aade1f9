#!/usr/bin/env bash
# The whole test suite: sets up what it needs (scripts/setup.sh), builds every binary the
# end-to-end tests start, then runs every test in the workspace. Extra args go to cargo test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
eval "$(scripts/setup.sh --cluster)"
cargo build --workspace --bins
cargo test --workspace "$@"
