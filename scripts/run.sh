#!/usr/bin/env bash
# The main job: the render service on this machine, slots derived from its cgroup limits.
# Extra args go to `render-pod serve` (e.g. --listen 127.0.0.1:9000 --slots 2).
# With --office (anywhere among them) Office input works too: LibreOffice is installed from
# Debian when missing, Gotenberg is built from its Go module (Go is needed only then) and runs on
# 127.0.0.1 beside the service, stopped with it (scripts/with-gotenberg.sh).
# With --jobs durable jobs work too: a NATS server (built from its Go module) runs on 127.0.0.1
# beside the service (scripts/with-nats.sh), and a local folder is the object store, with the
# buckets `uploads` and `results` (RENDERPOOL_JOBS_DIR, default ~/.local/state/renderpool/jobs:
# s3://results/x is <folder>/objects/results/x); webhooks are signed with the secret in
# <folder>/webhook-secret, made on the first run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
office=false
jobs=false
serve=()
for arg in "$@"; do
  case $arg in
    --office) office=true ;;
    --jobs) jobs=true ;;
    *) serve+=("$arg") ;;
  esac
done
if ! $office && ! $jobs; then
  setup_env=$(scripts/setup.sh)
  eval "$setup_env"
  exec cargo run --release --quiet -p render-pod -- serve "${serve[@]}"
fi
wrappers=()
if $office; then
  setup_env=$(scripts/setup.sh --office)
  eval "$setup_env"
  wrappers+=(scripts/with-gotenberg.sh)
fi
if $jobs; then
  setup_env=$(scripts/setup.sh --jobs)
  eval "$setup_env"
  export RENDERPOOL_JOBS_DIR=${RENDERPOOL_JOBS_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/renderpool/jobs}
  mkdir -p "$RENDERPOOL_JOBS_DIR/objects/uploads" "$RENDERPOOL_JOBS_DIR/objects/results"
  export RENDERPOD_OBJECTS_DIR="$RENDERPOOL_JOBS_DIR/objects"
  export RENDERPOD_OBJECTS_READ_BUCKETS=uploads,results RENDERPOD_OBJECTS_WRITE_BUCKETS=uploads,results
  export RENDERPOD_JOBS_UPLOAD_URL=s3://uploads/incoming
  # Webhooks of a local run go to local receivers, signed with a secret made once.
  export RENDERPOD_JOBS_WEBHOOK_ALLOW_PRIVATE=true
  secret="$RENDERPOOL_JOBS_DIR/webhook-secret"
  [ -s "$secret" ] || (umask 077 && echo "whsec_$(head -c 32 /dev/urandom | base64)" >"$secret")
  export RENDERPOD_JOBS_WEBHOOK_SECRET_FILE="$secret"
  echo "run.sh: durable jobs on; the object store is $RENDERPOD_OBJECTS_DIR (s3://BUCKET/KEY is BUCKET/KEY there)" >&2
  wrappers+=(scripts/with-nats.sh)
fi
# Built first, so the servers beside it do not idle through a cold compile.
cargo build --release --quiet -p render-pod
exec "${wrappers[@]}" "${CARGO_TARGET_DIR:-$root/target}/release/render-pod" serve "${serve[@]}"
