#!/usr/bin/env bash
# Installs what the local service (and, with --cluster, the tests) need on a fresh Debian
# machine and prints the env lines that point at them. Idempotent: a warm machine takes a second.
#   eval "$(scripts/setup.sh)"            ->  PDFIUM_LIB_PATH (needs cargo, python3 with pip)
#   eval "$(scripts/setup.sh --cluster)"  ->  also RENDERPOOL_CLUSTER_BIN (the Go-built control
#                                             plane, the real node and Gotenberg; needs go)
#                                             after installing LibreOffice, RENDERPOOL_CORPUS
#                                             (the test documents), what --images gives and
#                                             RENDERPOOL_PREVIOUS_RELEASE (the previous chart
#                                             release and its images, for the upgrade test)
#   eval "$(scripts/setup.sh --cluster-early)"  ->  as --cluster without the autoscaling pipeline's
#                                             tools (tests/cluster/build.sh --late) and the
#                                             previous release: scripts/test.sh builds those
#                                             beside the tests that need neither
#   eval "$(scripts/setup.sh --office)"   ->  PDFIUM_LIB_PATH and RENDERPOOL_CLUSTER_BIN with
#                                             Gotenberg only (scripts/run.sh --office; needs go)
#   eval "$(scripts/setup.sh --jobs)"     ->  PDFIUM_LIB_PATH and RENDERPOOL_CLUSTER_BIN with the
#                                             NATS server only (scripts/run.sh --jobs; needs go)
#   eval "$(scripts/setup.sh --images)"   ->  PDFIUM_LIB_PATH and RENDERPOOL_IMAGES (OCI image
#                                             archives, images/build.sh; needs go)
# Callers assign the output before eval-ing it (`setup_env=$(scripts/setup.sh); eval "$setup_env"`):
# `eval "$(...)"` alone would hide a failed set-up behind eval's own success.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cluster=false
early=false
office=false
jobs=false
images=false
case ${1:-} in
  --cluster) cluster=true images=true ;;
  --cluster-early) cluster=true images=true early=true ;;
  --office) office=true ;;
  --jobs) jobs=true ;;
  --images) images=true ;;
esac

command -v cargo >/dev/null 2>&1 || { echo "setup: cargo is required (Rust >= 1.89)" >&2; exit 1; }
if $cluster || $office || $jobs || $images; then
  command -v go >/dev/null 2>&1 || { echo "setup: go is required for the tests, Office, jobs and the images (Go >= 1.26)" >&2; exit 1; }
fi
# Debian packages for what is missing: a C toolchain for cargo's linking, CMake and nasm for the
# encoders' bundled C and assembly (libjpeg-turbo's SIMD), python3 with pip for the PDFium wheel;
# the tests also make certificates with openssl.
need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
command -v nasm >/dev/null 2>&1 || need_apt+=(nasm)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
python3 -m pip --version >/dev/null 2>&1 || need_apt+=(python3-pip)
if $cluster; then
  # The real test node: runc runs its containers, nft holds kube-proxy's rules and the harness's
  # network guard, ip makes its bridge and routes.
  for tool in openssl:openssl runc:runc nft:nftables ip:iproute2; do
    PATH=$PATH:/usr/sbin:/sbin command -v "${tool%%:*}" >/dev/null 2>&1 || need_apt+=("${tool#*:}")
  done
  # The real-node tests' pods run the host's static busybox (Debian's dynamic one needs a libc).
  dpkg -s busybox-static >/dev/null 2>&1 || need_apt+=(busybox-static)
  # Azurite, the Azure Blob emulator of the job tests, is a Node.js program installed with npm.
  command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
  command -v npm >/dev/null 2>&1 || need_apt+=(npm)
fi
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
if $cluster || $office || $jobs; then
  tools=()
  $office && tools=(gotenberg)
  $jobs && tools=(nats-server)
  $early && tools=(--early)
  # LibreOffice is for Gotenberg: a run with jobs alone needs none.
  $jobs || "$root/scripts/install-office.sh"
  cluster_bin=$("$root/tests/cluster/build.sh" "${tools[@]}" | tail -n 1)
  echo "export RENDERPOOL_CLUSTER_BIN='$cluster_bin'"
fi
if $cluster; then
  corpus=$("$root/scripts/fetch-corpus.sh" | tail -n 1)
  echo "export RENDERPOOL_CORPUS='$corpus'"
fi
if $images; then
  images_dir=$("$root/images/build.sh" | tail -n 1)
  echo "export RENDERPOOL_IMAGES='$images_dir'"
fi
if $cluster && ! $early; then
  # The upgrade test's starting point: the previous release's chart and images.
  previous=$("$root/scripts/previous-release.sh" | tail -n 1)
  echo "export RENDERPOOL_PREVIOUS_RELEASE='$previous'"
fi
