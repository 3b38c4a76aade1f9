#!/usr/bin/env bash
# Runs a command next to a local Gotenberg (its LibreOffice-only command) on 127.0.0.1, with
# RENDERPOD_GOTENBERG_URL pointing at it, and stops Gotenberg and its LibreOffice when the command
# ends, also on Ctrl-C. Needs RENDERPOOL_CLUSTER_BIN from `scripts/setup.sh --office`.
#   scripts/with-gotenberg.sh COMMAND [ARGS...]      (GOTENBERG_PORT=3000 for a fixed port)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib/local-server.sh
. "$root/scripts/lib/local-server.sh"
bin=${RENDERPOOL_CLUSTER_BIN:?run it after eval \"\$(scripts/setup.sh --office)\"}
port=${GOTENBERG_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
state=$(mktemp -d "${TMPDIR:-/tmp}/renderpool-gotenberg.XXXXXX")
log="$state/gotenberg.log"

mapfile -t gotenberg_env < <("$root/scripts/gotenberg-env.sh" "$state" "$bin")
# Its own session: the terminal's Ctrl-C goes to the service, which drains; Gotenberg is stopped
# after it, by the trap below.
env "${gotenberg_env[@]}" API_BIND_IP=127.0.0.1 API_PORT="$port" \
  setsid "$root/scripts/read-only-tmp.sh" "$state" "$bin/gotenberg-libreoffice" --libreoffice-auto-start=true \
  --gotenberg-graceful-shutdown-duration=5s --api-disable-download-from --webhook-disable \
  >"$log" 2>&1 &
gotenberg=$!

stop() {
  stop_server "$gotenberg"
  # LibreOffice runs in a process group of its own; whatever still names our state folder is ours.
  for proc in /proc/[0-9]*; do
    if tr '\0' ' ' <"$proc/cmdline" 2>/dev/null | grep -qF -- "$state"; then
      kill -KILL "${proc#/proc/}" 2>/dev/null || true
    fi
  done
  rm -rf "$state"
}
trap stop EXIT
trap 'exit 130' INT TERM

await_server "$gotenberg" "http://127.0.0.1:$port/health" 600 \
  "with-gotenberg: Gotenberg did not become healthy" "$log"
echo "with-gotenberg: Gotenberg on http://127.0.0.1:$port (log $log)" >&2
RENDERPOD_GOTENBERG_URL="http://127.0.0.1:$port" "$@"
