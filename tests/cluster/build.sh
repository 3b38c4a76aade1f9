#!/usr/bin/env bash
# Builds the test control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, kwok, helm) and Gotenberg (its LibreOffice-only command, with pdfcpu) from the pinned
# wrapper modules beside this script. Binaries are cached outside the checkout, keyed by tool
# version and go.sum hash, so a warm run only checks stamps.
# Prints the bin directory on the last line of stdout. Wrapper names as arguments build only
# those (images/build.sh asks for gotenberg alone).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${RENDERPOOL_CACHE:-$HOME/.cache/renderpool}
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

module_version() { awk -v m="$2" '$1 == m { print $2; exit }' "$here/$1/go.mod"; }
K8S_VERSION=$(module_version k8s k8s.io/kubernetes)
k8s_minor=$(echo "$K8S_VERSION" | cut -d. -f2)

# One cache folder per build: "<tool>-<version>-<hash>", the hash covering go.sum, ldflags and
# packages, so changing any of them builds anew and never reuses a stale binary.
stamp() {
  local wrapper=$1 version=$2; shift 2
  echo "$wrapper-$version-$({ cat "$here/$wrapper/go.sum"; echo "$@"; } | sha256sum | cut -c1-12)"
}

bin="$cache/bin"
mkdir -p "$bin"

only=" $* "
wanted() { [ "$only" = "  " ] || [[ $only == *" $1 "* ]]; }

build() { # build <wrapper> <version> <ldflags> <package>...
  local wrapper=$1 version=$2 ldflags=$3; shift 3
  wanted "$wrapper" || return 0
  local dest
  dest="$cache/go/$(stamp "$wrapper" "$version" "$ldflags" "$@")"
  if [ ! -f "$dest/.complete" ]; then
    echo "building $wrapper $version (cold: about 10 minutes for all tools on 2 cores)" >&2
    local start=$SECONDS
    mkdir -p "$dest"
    # A single package is named after its wrapper (etcd's main package would be "server").
    local out="$dest/"
    [ $# -eq 1 ] && out="$dest/$wrapper"
    (cd "$here/$wrapper" && go build -trimpath -ldflags "$ldflags" -o "$out" "$@")
    touch "$dest/.complete"
    # Drop this tool's older builds so the cache holds one per tool.
    find "$cache/go" -maxdepth 1 -name "$wrapper-*" ! -path "$dest" -exec rm -rf {} +
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
  local flags="-s -w -X helm.sh/helm/v3/internal/version.version=$1"
  flags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  # Without these, offline `helm template` and lint assume Kubernetes 1.20.
  for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    flags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
  done
  echo "$flags"
}

build etcd "$(module_version etcd go.etcd.io/etcd/server/v3)" "-s -w" go.etcd.io/etcd/server/v3
build kwok "$(module_version kwok sigs.k8s.io/kwok)" "-s -w" sigs.k8s.io/kwok/cmd/kwok
helm_version=$(module_version helm helm.sh/helm/v3)
build helm "$helm_version" "$(helm_ldflags "$helm_version")" helm.sh/helm/v3/cmd/helm
build k8s "$K8S_VERSION" "$(k8s_ldflags)" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
gotenberg_version=$(module_version gotenberg github.com/gotenberg/gotenberg/v8)
# Without the version stamp, /version answers "snapshot".
build gotenberg "$gotenberg_version" "-s -w -X github.com/gotenberg/gotenberg/v8/cmd.Version=${gotenberg_version#v}" \
  github.com/gotenberg/gotenberg/v8/cmd/gotenberg-libreoffice github.com/pdfcpu/pdfcpu/cmd/pdfcpu
# kwok >= 0.8 has no built-in stages: assemble the fast node/pod lifecycle from its module.
wanted kwok || { echo "$bin"; exit 0; }
kwok_dir=$(cd "$here/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
for stage in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
  pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
  echo "---"
  cat "$kwok_dir/kustomize/stage/$stage.yaml"
done > "$bin/kwok-stages.yaml"
echo "$bin"
