#!/usr/bin/env bash
# The main job: the render service on this machine, slots derived from its cgroup limits.
# Extra args go to `render-pod serve` (e.g. --listen 127.0.0.1:9000 --slots 2).
# With --office (anywhere among them) Office input works too: LibreOffice is installed from
# Debian when missing, Gotenberg is built from its Go module (Go is needed only then) and runs on
# 127.0.0.1 beside the service, stopped with it (scripts/with-gotenberg.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
office=false
serve=()
for arg in "$@"; do
  if [ "$arg" = "--office" ]; then office=true; else serve+=("$arg"); fi
done
if ! $office; then
  setup_env=$(scripts/setup.sh)
  eval "$setup_env"
  exec cargo run --release --quiet -p render-pod -- serve "${serve[@]}"
fi
setup_env=$(scripts/setup.sh --office)
eval "$setup_env"
# Built first, so Gotenberg does not idle through a cold compile.
cargo build --release --quiet -p render-pod
exec scripts/with-gotenberg.sh "${CARGO_TARGET_DIR:-$root/target}/release/render-pod" serve "${serve[@]}"
