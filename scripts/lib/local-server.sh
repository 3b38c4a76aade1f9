# Shared by the scripts/with-*.sh wrappers: waiting for the local server they start to answer,
# and stopping it. Sourced, not run.

# await_server PID URL TENTHS WHAT LOG: polls URL every 0.1 s, at most TENTHS times, while PID
# runs; when it never answers, prints "WHAT; its log:" and LOG to stderr and exits 1.
await_server() {
  local pid=$1 url=$2 tenths=$3 what=$4 log=$5
  for _ in $(seq "$tenths"); do
    kill -0 "$pid" 2>/dev/null || break
    if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' \
      "$url" 2>/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  echo "$what; its log:" >&2
  cat "$log" >&2
  exit 1
}

# stop_server PID: SIGTERM, up to 10 s to exit, then SIGKILL.
stop_server() {
  kill -TERM "$1" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null || true
}
