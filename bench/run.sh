#!/usr/bin/env bash
# Runs the render-pod benchmarks and prints their figures (nothing passes or fails on time).
#   service:  the real service against in-process PDFium, /healthz under saturation,
#             concurrent vs sequential extraction, peak RSS, the memory ceiling's cost, the
#             front limits' cost, RSS under resource bombs, disconnect to free slot
#             (render-pod/benches/service.rs)
#   front:    the issue's upload flood: supervisor peak RSS, time to a 503, /healthz during it
#             (render-pod/benches/front.rs)
#   unread_answers: the supervisor's peak RSS under answers nobody reads, answer budget on
#             against off, and the budget's cost on the service path (render-pod/benches/unread_answers.rs)
#   protections: the workers' sandbox and the answer budget, each priced where it acts (rendering
#             sandboxed against not, the filter per call, a worker's calls per page with strace)
#             (render-pod/benches/protections.rs)
#   encoding: each output format against a plain default PNG encode (render-pod/benches/encoding.rs)
#   viewer:   50 pages of one 5 MB document on one connection, uploaded with every page against
#             named by Repr-Digest (render-pod/benches/viewer.rs)
#   front_cpu: the HTTP front's CPU per page, split by step with perf (render-pod/benches/front_cpu.rs)
#   office:   Office to PDF through the render pod and real Gotenberg, one instance and one per
#             core, and straight at Gotenberg; Gotenberg's and the cache's RSS (tests/benches/office.rs)
#   jobs:     durable jobs against /v1/render on one release pod with real NATS and a real S3
#             server: pages per second, publish to start, a 2,000-job backlog, previews during it
#             (tests/benches/jobs.rs)
# Sets up libpdfium, LibreOffice and Gotenberg (scripts/setup.sh --office). Figures are only
# meaningful on an otherwise idle machine: the load average is printed alongside.
set -euo pipefail
cd "$(dirname "$0")/.."

setup_env=$(scripts/setup.sh --office)
eval "$setup_env"
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for bench in service front unread_answers protections encoding viewer front_cpu; do
    echo
    echo "### cargo bench -p render-pod --bench $bench"
    cargo bench -p render-pod --bench "$bench" 2>&1 | grep -v '^\[server\]'
done
echo
echo "### cargo bench -p renderpool-tests --bench office"
# Dev profile (as for operator_scale): the time is LibreOffice's, and a release build of the
# test crate's Kubernetes dependencies would cost more than the whole run. It starts the
# dev-profile render-pod binary.
cargo build --quiet -p render-pod
cargo bench -p renderpool-tests --bench office --profile dev
echo
echo "### cargo bench -p renderpool-tests --bench jobs"
# The NATS server and the S3 server beside Gotenberg in the same bin folder; a release render pod.
RENDERPOOL_CLUSTER_BIN=$(tests/cluster/build.sh nats-server versitygw | tail -n 1)
export RENDERPOOL_CLUSTER_BIN
cargo build --quiet --release -p render-pod
cargo bench -p renderpool-tests --bench jobs --profile dev
echo
echo "load average afterwards $(cut -d' ' -f1-3 /proc/loadavg)"
