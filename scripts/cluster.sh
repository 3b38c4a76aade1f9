#!/usr/bin/env bash
# A local Kubernetes cluster on this machine, from what the test command already built: the same
# set-up and build (scripts/prepare.sh, into $CARGO_TARGET_DIR, else target/), so after
# scripts/test.sh nothing compiles. Then runs local-cluster with these args; it prints the
# exports for another shell and stops everything on Ctrl-C or SIGTERM.
#   scripts/cluster.sh                                       3 kwok nodes of 8 CPU / 32Gi
#   scripts/cluster.sh --real-node --env-file /tmp/rp.env 0  this machine's real node alone
# (local-cluster [--real-node [--images DIR]] [--env-file FILE] [NODES [CPU [MEMORY]]])
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
setup_env=$("$root/scripts/prepare.sh")
eval "$setup_env"
# prepare.sh builds from the repository root, where a relative target dir is resolved.
target=${CARGO_TARGET_DIR:-target}
[[ $target == /* ]] || target=$root/$target
exec "$target/debug/local-cluster" "$@"
