#!/usr/bin/env bash
# Runs a command next to a local NATS server with JetStream on 127.0.0.1 (the durable jobs'
# broker), with RENDERPOD_JOBS_NATS_URL pointing at it, and stops NATS when the command ends,
# also on Ctrl-C. Its store is kept in $RENDERPOOL_JOBS_DIR/nats, so queued jobs and job states
# outlive a restart. Needs RENDERPOOL_CLUSTER_BIN from `scripts/setup.sh --jobs`.
#   scripts/with-nats.sh COMMAND [ARGS...]   (NATS_PORT=4222 NATS_MONITOR_PORT=8222 by default)
set -euo pipefail
# shellcheck source=scripts/lib/local-server.sh
. "$(dirname "$0")/lib/local-server.sh"
bin=${RENDERPOOL_CLUSTER_BIN:?run it after eval \"\$(scripts/setup.sh --jobs)\"}
dir=${RENDERPOOL_JOBS_DIR:?the folder of the local jobs (scripts/run.sh --jobs sets it)}
port=${NATS_PORT:-4222}
monitor=${NATS_MONITOR_PORT:-8222}
mkdir -p "$dir/nats"
log="$dir/nats/nats.log"

# Its own session: the terminal's Ctrl-C goes to the service, which drains and hands back the
# jobs it holds; NATS is stopped after it, by the trap below.
setsid "$bin/nats-server" -js -sd "$dir/nats/jetstream" -a 127.0.0.1 -p "$port" -m "$monitor" \
  >"$log" 2>&1 &
nats=$!

trap 'stop_server "$nats"' EXIT
trap 'exit 130' INT TERM
await_server "$nats" "http://127.0.0.1:$monitor/healthz?js-enabled-only=true" 300 \
  "with-nats: NATS did not become healthy (is port $port or $monitor taken?)" "$log"
echo "with-nats: NATS on nats://127.0.0.1:$port, monitoring http://127.0.0.1:$monitor/jsz (log $log)" >&2
RENDERPOD_JOBS_NATS_URL="nats://127.0.0.1:$port" "$@"
