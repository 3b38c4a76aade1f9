#!/usr/bin/env bash
# Runs the render-pod benchmarks and prints their figures (nothing passes or fails on time).
#   service:  the real service against in-process PDFium, /healthz under saturation,
#             concurrent vs sequential extraction, peak RSS, the memory ceiling's cost, RSS
#             under resource bombs, disconnect to free slot  (render-pod/benches/service.rs)
#   encoding: each output format against a plain default PNG encode (render-pod/benches/encoding.rs)
# Needs libpdfium (scripts/fetch-pdfium.sh, or PDFIUM_LIB_PATH). Figures are only meaningful on
# an otherwise idle machine: the load average is printed alongside.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for bench in service encoding; do
    echo
    echo "### cargo bench -p render-pod --bench $bench"
    cargo bench -p render-pod --bench "$bench" 2>&1 | grep -v '^\[server\]'
done
echo
echo "load average afterwards $(cut -d' ' -f1-3 /proc/loadavg)"
