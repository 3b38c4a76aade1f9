#!/usr/bin/env bash
# Builds the test control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, kwok, helm) from the pinned wrapper modules beside this script. Binaries are cached
# outside the checkout, keyed by tool version and go.sum hash, so a warm run only checks stamps.
# Prints the bin directory on the last line of stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${RENDERPOOL_CACHE:-$HOME/.cache/renderpool}
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

module_version() { awk -v m="$2" '$1 == m { print $2; exit }' "$here/$1/go.mod"; }
K8S_VERSION=$(module_version k8s k8s.io/kubernetes)
k8s_minor=$(echo "$K8S_VERSION" | cut -d. -f2)

# One cache folder per tool: "<tool>-<version>-<first 12 of sha256(go.sum)>".
stamp() { echo "$1-$2-$(sha256sum "$here/$1/go.sum" | cut -c1-12)"; }

bin="$cache/bin"
mkdir -p "$bin"

build() { # build <wrapper> <version> <ldflags> <package>...
  local wrapper=$1 version=$2 ldflags=$3; shift 3
  local dest="$cache/go/$(stamp "$wrapper" "$version")"
  if [ ! -f "$dest/.complete" ]; then
    echo "building $wrapper $version (cold builds of k8s take 15-30 min on 2 cores)" >&2
    local start=$SECONDS
    mkdir -p "$dest"
    # A single package is named after its wrapper (etcd's main package would be "server").
    local out="$dest/"
    [ $# -eq 1 ] && out="$dest/$wrapper"
    (cd "$here/$wrapper" && go build -trimpath -ldflags "$ldflags" -o "$out" "$@")
    touch "$dest/.complete"
    echo "built $wrapper in $((SECONDS - start))s" >&2
  fi
  for f in "$dest"/*; do ln -sf "$f" "$bin/$(basename "$f")"; done
}

k8s_ldflags() {
  local v=$K8S_VERSION flags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$k8s_minor"
    flags+=" -X $pkg.gitCommit=0000000000000000000000000000000000000000 -X $pkg.gitTreeState=clean"
    flags+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$flags"
}

helm_ldflags() {
  # Without these, offline `helm template` and lint assume Kubernetes 1.20.
  local flags="-s -w"
  for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    flags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
  done
  echo "$flags"
}

build etcd "$(module_version etcd go.etcd.io/etcd/server/v3)" "-s -w" go.etcd.io/etcd/server/v3
build kwok "$(module_version kwok sigs.k8s.io/kwok)" "-s -w" sigs.k8s.io/kwok/cmd/kwok
build helm "$(module_version helm helm.sh/helm/v3)" "$(helm_ldflags)" helm.sh/helm/v3/cmd/helm
build k8s "$K8S_VERSION" "$(k8s_ldflags)" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
echo "$bin"
