#!/usr/bin/env bash
# Installs what the local service (and, with --cluster, the tests) need on a fresh Debian
# machine and prints the env lines that point at them. Idempotent: a warm machine takes a second.
#   eval "$(scripts/setup.sh)"            ->  PDFIUM_LIB_PATH
#   eval "$(scripts/setup.sh --cluster)"  ->  also RENDERPOOL_CLUSTER_BIN (Go-built control plane)
#                                             and what --images gives
#   eval "$(scripts/setup.sh --images)"   ->  RENDERPOOL_IMAGES (OCI image archives, images/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
images=false
case ${1:-} in --cluster | --images) images=true ;; esac

for tool in cargo go; do
  command -v "$tool" >/dev/null 2>&1 || { echo "setup: $tool is required (Rust >= 1.89, Go >= 1.26)" >&2; exit 1; }
done
need_apt=()
for tool in openssl:openssl python3:python3 cc:build-essential; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || need_apt+=("${tool#*:}")
done
# Image assembly (umoci, mmdebstrap, jq) and the image tests' runtime (runc).
if $images; then
  for tool in umoci mmdebstrap runc jq; do
    command -v "$tool" >/dev/null 2>&1 || need_apt+=("$tool")
  done
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]}" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >&2
fi

pdfium=$("$root/scripts/fetch-pdfium.sh" | tail -n 1)
echo "export PDFIUM_LIB_PATH='$pdfium'"
if [ "${1:-}" = "--cluster" ]; then
  cluster_bin=$("$root/tests/cluster/build.sh" | tail -n 1)
  echo "export RENDERPOOL_CLUSTER_BIN='$cluster_bin'"
fi
if $images; then
  images_dir=$("$root/images/build.sh" | tail -n 1)
  echo "export RENDERPOOL_IMAGES='$images_dir'"
fi
