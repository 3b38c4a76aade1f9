#!/usr/bin/env bash
# Installs what the local service (and, with --cluster, the tests) need on a fresh Debian
# machine and prints the env lines that point at them. Idempotent: a warm machine takes a second.
#   eval "$(scripts/setup.sh)"            ->  PDFIUM_LIB_PATH
#   eval "$(scripts/setup.sh --cluster)"  ->  also RENDERPOOL_CLUSTER_BIN (Go-built control plane
#                                             and Gotenberg) after installing LibreOffice
#   eval "$(scripts/setup.sh --office)"   ->  PDFIUM_LIB_PATH and RENDERPOOL_CLUSTER_BIN with
#                                             Gotenberg only (scripts/run.sh --office)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

for tool in cargo go; do
  command -v "$tool" >/dev/null 2>&1 || { echo "setup: $tool is required (Rust >= 1.89, Go >= 1.26)" >&2; exit 1; }
done
need_apt=()
for tool in openssl:openssl python3:python3 cc:build-essential; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || need_apt+=("${tool#*:}")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]}" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >&2
fi

pdfium=$("$root/scripts/fetch-pdfium.sh" | tail -n 1)
echo "export PDFIUM_LIB_PATH='$pdfium'"
case "${1:-}" in
  --cluster | --office)
    "$root/scripts/install-office.sh"
    tools=()
    [ "$1" = "--office" ] && tools=(gotenberg)
    cluster_bin=$("$root/tests/cluster/build.sh" "${tools[@]}" | tail -n 1)
    echo "export RENDERPOOL_CLUSTER_BIN='$cluster_bin'"
    ;;
esac
