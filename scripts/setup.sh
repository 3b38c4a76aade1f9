#!/usr/bin/env bash
# Installs what the local service (and, with --cluster, the tests) need on a fresh Debian
# machine and prints the env lines that point at them. Idempotent: a warm machine takes a second.
#   eval "$(scripts/setup.sh)"            ->  PDFIUM_LIB_PATH
#   eval "$(scripts/setup.sh --cluster)"  ->  also RENDERPOOL_CLUSTER_BIN (Go-built control plane
#                                            and real node)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

for tool in cargo go; do
  command -v "$tool" >/dev/null 2>&1 || { echo "setup: $tool is required (Rust >= 1.89, Go >= 1.26)" >&2; exit 1; }
done
need_apt=()
tools=(openssl:openssl python3:python3 cc:build-essential)
# The real test node: runc runs its containers, nft holds kube-proxy's rules and the harness's
# network guard, ip makes its bridge and routes.
[ "${1:-}" = "--cluster" ] && tools+=(runc:runc nft:nftables ip:iproute2)
for tool in "${tools[@]}"; do
  PATH=$PATH:/usr/sbin:/sbin command -v "${tool%%:*}" >/dev/null 2>&1 || need_apt+=("${tool#*:}")
done
# The real-node tests' pods run the host's static busybox (Debian's dynamic one needs a libc).
if [ "${1:-}" = "--cluster" ] && ! dpkg -s busybox-static >/dev/null 2>&1; then
  need_apt+=(busybox-static)
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
