#!/usr/bin/env bash
# The main job: the render service on this machine, slots derived from its cgroup limits.
# Extra args go to `render-pod serve` (e.g. --listen 127.0.0.1:9000 --slots 2).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
eval "$(scripts/setup.sh)"
exec cargo run --release --quiet -p render-pod -- serve "$@"
