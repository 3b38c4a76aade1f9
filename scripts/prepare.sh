#!/usr/bin/env bash
# What the test command and the local cluster stand on: the set-up (scripts/setup.sh --cluster:
# LibreOffice, the Go-built cluster tools, the test documents, the images) and a debug build of
# every binary of the workspace, into $CARGO_TARGET_DIR (else target/). One build for both, so
# after either the other compiles nothing. Prints setup.sh's env lines on stdout, for eval:
#   setup_env=$(scripts/prepare.sh); eval "$setup_env"
set -euo pipefail
cd "$(dirname "$0")/.."
setup_env=$(scripts/setup.sh --cluster)
eval "$setup_env"
cargo build --workspace --bins >&2
echo "$setup_env"
