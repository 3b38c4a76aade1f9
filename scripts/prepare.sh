#!/usr/bin/env bash
# What the test command and the local cluster stand on: the set-up (scripts/setup.sh --cluster:
# LibreOffice, the Go-built cluster tools, the test documents, the images) and a debug build of
# every binary and bench of the workspace, into $CARGO_TARGET_DIR (else target/). One build for
# both, so after either the other compiles nothing. Prints setup.sh's env lines on stdout, for eval:
#   setup_env=$(scripts/prepare.sh); eval "$setup_env"
# With --early, the set-up is scripts/setup.sh --cluster-early (scripts/test.sh builds the rest
# beside the first tests).
set -euo pipefail
cd "$(dirname "$0")/.."
cluster=--cluster
case ${1:-} in
  --early) cluster=--cluster-early ;;
  "") ;;
  *) echo "prepare.sh: unknown argument $1 (--early or none)" >&2; exit 2 ;;
esac
# The toolchain packages the workspace's build needs (cmake, nasm) first; then the cluster
# set-up, which is mostly Go builds, beside the workspace's build: on a cold machine each leaves
# a core idle for long stretches (one large crate or one link at a time), so together they take
# minutes less than one after the other.
start=$SECONDS
base_env=$(scripts/setup.sh)
setup_out=$(mktemp)
trap 'rm -f "$setup_out"; [ -z "${setup_pid:-}" ] || kill -- "-$setup_pid" 2>/dev/null || true' EXIT
# A session of its own, so the whole set-up stops with this script (a failed build, a ^C).
setsid scripts/setup.sh "$cluster" >"$setup_out" &
setup_pid=$!
eval "$base_env"
# The benches too: no test runs them, and this build is where a bench that no longer compiles,
# or (under .ci/run's clippy driver) one that a lint refuses, fails.
cargo build --workspace --bins --benches >&2
echo "prepare: the workspace's build done at $((SECONDS - start))s" >&2
setup_status=0
wait "$setup_pid" || setup_status=$?
setup_pid=
[ "$setup_status" -eq 0 ] || { echo "prepare: scripts/setup.sh $cluster failed ($setup_status)" >&2; exit "$setup_status"; }
echo "prepare: the set-up done at $((SECONDS - start))s" >&2
cat "$setup_out"
