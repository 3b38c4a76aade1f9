#!/usr/bin/env bash
# Builds the test control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, kwok, helm), Gotenberg (its LibreOffice-only command, with pdfcpu), the real test
# node (kubelet, kube-proxy, containerd with its runc shim and ctr, the CNI plugins, CoreDNS) and
# the autoscaling pipeline (Prometheus, prometheus-adapter, Karpenter with its KWOK provider, and
# KEDA with its CRDs) and the durable jobs' servers (NATS, the Versity S3 Gateway, the GCS
# emulator fake-gcs-server) from the pinned wrapper modules beside this script, and installs the
# Azure Blob emulator Azurite from its npm lockfile. Binaries are cached outside the checkout,
# keyed by tool version and go.sum (or lockfile) hash, so a warm run only checks stamps.
# Prints the bin directory on the last line of stdout. With wrapper names as arguments (e.g.
# `build.sh gotenberg` for scripts/run.sh --office), only those are built; `--late` builds the
# autoscaling pipeline's tools alone and `--early` every other (scripts/test.sh builds the late
# ones while the tests that need none of them run).
set -euo pipefail
late=(prometheus prometheus-adapter keda karpenter)
only=() except=()
case ${1:-} in
  --late) only=("${late[@]}") ;;
  --early) except=("${late[@]}") ;;
  *) only=("$@") ;;
esac
wanted() {
  [[ " ${except[*]} " != *" $1 "* ]] && { [ ${#only[@]} -eq 0 ] || [[ " ${only[*]} " == *" $1 "* ]]; }
}
here=$(cd "$(dirname "$0")" && pwd)
cache=${RENDERPOOL_CACHE:-$HOME/.cache/renderpool}
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

# A requirement is in a block ("m v") or on its own line ("require m v").
module_version() {
  awk -v m="$2" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$here/$1/go.mod"
}
# GOTENBERG_VERSION, KUBERNETES_VERSION, CONTAINERD_VERSION: the pins that Rust and the images
# read too. A go.mod is where Go takes a version from, so the two must agree.
# shellcheck source=versions.env
. "$here/../../versions.env"
# pinned <wrapper> <module> <version from versions.env>: the go.mod's version, if it agrees.
pinned() {
  local got
  got=$(module_version "$1" "$2")
  [ "$got" = "v$3" ] || {
    echo "build.sh: $1/go.mod requires $2 $got but versions.env pins $3: change both together" >&2
    return 1
  }
  echo "$got"
}
K8S_VERSION=$(pinned k8s k8s.io/kubernetes "$KUBERNETES_VERSION")
k8s_minor=$(echo "$K8S_VERSION" | cut -d. -f2)

# One cache folder per build: "<tool>-<version>-<hash>", the hash covering go.sum, the wrapper's
# own Go files (CoreDNS's main), ldflags, build tags and packages, so changing any of them builds
# anew and never reuses a stale binary.
stamp() {
  local wrapper=$1 version=$2; shift 2
  echo "$wrapper-$version-$({ cat "$here/$wrapper/go.sum" "$here/$wrapper"/*.go 2>/dev/null; echo "$@"; } |
    sha256sum | cut -c1-12)"
}

bin="$cache/bin"
# --early links into a folder of its own, emptied first: while the late tools build, a test that
# needs one finds it missing, on a warm machine as on a cold one.
if [ ${#except[@]} -gt 0 ]; then
  bin="$cache/bin-early"
  rm -rf "$bin"
fi
mkdir -p "$bin"

# [TOOLCHAIN=...] module_info <folder> <module[@version]> <field>: one field (Dir, Sum) of what
# `go mod download -json`, run in <folder>, reports for the module; it fetches it if missing.
module_info() {
  (cd "$1" && GOTOOLCHAIN=${TOOLCHAIN:-local} go mod download -json "$2") |
    sed -n "s/^[[:space:]]*\"$3\": \"\(.*\)\",*\$/\1/p"
}
# [TOOLCHAIN=...] module_dir <wrapper> <module>: the module's source folder in Go's module
# cache, fetched if missing (`go list -m` alone answers "" when a cached binary meant no build).
module_dir() {
  local dir
  dir=$(module_info "$here/$1" "$2" Dir)
  [ -d "$dir" ] || { echo "build.sh: no source folder for $2 in $1" >&2; return 1; }
  echo "$dir"
}

# Cold builds run as background jobs, RENDERPOOL_GO_JOBS (default 2) at a time: one `go build`
# leaves a core idle while it fetches modules and links, and two fill each other's gaps. A job's
# lines are prefixed with its tool; a failed job fails the script once all have ended.
go_jobs=${RENDERPOOL_GO_JOBS:-2}
# No DWARF from the compiler: every link already drops it (-w in each tool's ldflags), so it was
# generated for nothing; about 14 % of a cold build's CPU (etcd: 77 s against 90 s).
gcflags=all=-dwarf=false
failed=$(mktemp -d)
trap 'rm -rf "$failed"' EXIT

build() { # [BUILD_TAGS=...] [LINK_DIR=...] [TOOLCHAIN=...] [MODFILE=...] build <wrapper> <version> <ldflags> <package>...
  local wrapper=$1 version=$2 ldflags=$3 tags=${BUILD_TAGS:-} link_dir=${LINK_DIR:-$bin} modfile=${MODFILE:-}; shift 3
  wanted "$wrapper" || return 0
  local toolchain=${TOOLCHAIN:-local} dest
  # Tags, a toolchain and a go.mod of their own join the stamp only when set, so other tools keep
  # the stamps they had. A go.mod in the cache counts by its path inside it (a folder named for
  # what makes it), so a cache moved elsewhere keeps its builds.
  dest="$cache/go/$(stamp "$wrapper" "$version" "$ldflags" "gcflags=$gcflags" ${tags:+"tags=$tags"} \
    ${TOOLCHAIN:+"toolchain=$TOOLCHAIN"} ${modfile:+"modfile=${modfile#"$cache/"}"} "$@")"
  if [ -f "$dest/.complete" ]; then
    link_build "$dest" "$link_dir"
    return 0
  fi
  while [ "$(jobs -rp | wc -l)" -ge "$go_jobs" ]; do wait -n || true; done
  { go_build "$wrapper" "$version" "$ldflags" "$tags" "$toolchain" "$modfile" "$dest" "$link_dir" "$@" 2>&1 |
    sed -u "s/^/[$wrapper] /" >&2 || touch "$failed/$wrapper"; } &
}

go_build() { # go_build <wrapper> <version> <ldflags> <tags> <toolchain> <modfile> <dest> <link dir> <package>...
  local wrapper=$1 version=$2 ldflags=$3 tags=$4 toolchain=$5 modfile=$6 dest=$7 link_dir=$8; shift 8
  echo "building $wrapper $version (cold: 15-40 minutes for all tools on 2 cores, most of it k8s)"
  local start=$SECONDS
  mkdir -p "$dest"
  # A single package is named after its wrapper (etcd's main package would be "server").
  local out="$dest/"
  [ $# -eq 1 ] && out="$dest/$wrapper"
  # Each step checked: a job runs where a failure does not stop the shell.
  (cd "$here/$wrapper" && GOTOOLCHAIN=$toolchain go build -trimpath ${modfile:+-modfile "$modfile"} -tags "$tags" \
    -gcflags "$gcflags" -ldflags "$ldflags" -o "$out" "$@") ||
    return 1
  touch "$dest/.complete" || return 1
  # Drop this tool's older builds so the cache holds one per tool ("$wrapper-v*": a bare
  # "prometheus-*" would take prometheus-adapter's build too).
  find "$cache/go" -maxdepth 1 -name "$wrapper-v*" ! -path "$dest" -exec rm -rf {} +
  echo "built $wrapper in $((SECONDS - start))s"
  link_build "$dest" "$link_dir"
}

link_build() { # link_build <build folder> <link dir>: the build's binaries on the link dir
  mkdir -p "$2"
  for f in "$1"/*; do ln -sf "$f" "$2/$(basename "$f")"; done
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
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy
gotenberg_version=$(pinned gotenberg github.com/gotenberg/gotenberg/v8 "$GOTENBERG_VERSION")
# Without the version stamp, /version answers "snapshot".
build gotenberg "$gotenberg_version" "-s -w -X github.com/gotenberg/gotenberg/v8/cmd.Version=${gotenberg_version#v}" \
  github.com/gotenberg/gotenberg/v8/cmd/gotenberg-libreoffice github.com/pdfcpu/pdfcpu/cmd/pdfcpu

# The durable jobs' broker: NATS with JetStream (the job tests, their benchmark, run.sh --jobs).
nats_version=$(pinned nats-server github.com/nats-io/nats-server/v2 "$NATS_SERVER_VERSION")
build nats-server "$nats_version" "-s -w" github.com/nats-io/nats-server/v2
# Their real S3 server: the Versity S3 Gateway over a folder (a third of MinIO's cold build).
versitygw_version=$(module_version versitygw github.com/versity/versitygw)
build versitygw "$versitygw_version" "-s -w -X main.Version=$versitygw_version" \
  github.com/versity/versitygw/cmd/versitygw
# Their Google Cloud Storage emulator (gs:// URLs): no cloud is reachable from a test. The
# wrapper's own main serves fake-gcs-server's storage and mends one gap (see its main.go).
build fake-gcs-server "$(module_version fake-gcs-server github.com/fsouza/fake-gcs-server)" "-s -w" \
  renderpool.dev/tests/cluster/fake-gcs-server
# Their Azure Blob Storage emulator (az:// URLs), Microsoft's Azurite: a Node.js program from npm,
# installed from its lockfile (every package pinned by integrity hash) into a folder keyed by it.
if wanted azurite; then
  command -v npm >/dev/null 2>&1 || { echo "build.sh: Azurite needs Node.js and npm (scripts/setup.sh --cluster installs them)" >&2; exit 1; }
  azurite_dest="$cache/npm/azurite-$(cat "$here/azurite/package.json" "$here/azurite/package-lock.json" |
    sha256sum | cut -c1-12)"
  if [ ! -f "$azurite_dest/.complete" ]; then
    start=$SECONDS
    rm -rf "$azurite_dest"
    mkdir -p "$azurite_dest"
    cp "$here/azurite/package.json" "$here/azurite/package-lock.json" "$azurite_dest/"
    (cd "$azurite_dest" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >&2
    touch "$azurite_dest/.complete"
    find "$cache/npm" -maxdepth 1 -name "azurite-*" ! -path "$azurite_dest" -exec rm -rf {} +
    echo "installed azurite in $((SECONDS - start))s" >&2
  fi
  ln -sf "$azurite_dest/node_modules/.bin/azurite-blob" "$bin/azurite-blob"
fi

# The real node's runtime and network. Debian's runc and nft run beside them (scripts/setup.sh).
containerd_version=$(pinned containerd github.com/containerd/containerd/v2 "$CONTAINERD_VERSION")
BUILD_TAGS="no_btrfs no_devmapper no_zfs urfave_cli_no_docs" build containerd "$containerd_version" \
  "-s -w -X github.com/containerd/containerd/v2/version.Version=$containerd_version" \
  github.com/containerd/containerd/v2/cmd/containerd \
  github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
  github.com/containerd/containerd/v2/cmd/ctr
# CNI plugins get a folder of their own, off PATH: iproute2 has a `bridge` command too.
cni_plugins=github.com/containernetworking/plugins/plugins
LINK_DIR="$bin/cni" build cni "$(module_version cni github.com/containernetworking/plugins)" "-s -w" \
  "$cni_plugins/main/bridge" "$cni_plugins/ipam/host-local" "$cni_plugins/main/loopback"
# The wrapper's own main: CoreDNS with the plugins the test node's Corefile names, not all of them.
build coredns "$(module_version coredns github.com/coredns/coredns)" "-s -w" renderpool.dev/tests/cluster/coredns

# The autoscaling pipeline. Prometheus with the Kubernetes service discovery alone (the other
# discoveries pull in every cloud's SDK); its version stamp is the release the module version
# stands for (v0.316.0 is Prometheus 3.16.0).
prometheus_version=$(module_version prometheus github.com/prometheus/prometheus)
prometheus_release=$(echo "$prometheus_version" | sed -E 's/^v0\.([0-9])0?([0-9]+)\.([0-9]+)$/\1.\2.\3/')
# promtool (checks the chart's alerting rules) shares the server's packages: one go build.
BUILD_TAGS="remove_all_sd enable_kubernetes_sd" build prometheus "$prometheus_version" \
  "-s -w -X github.com/prometheus/common/version.Version=$prometheus_release" \
  github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool
build prometheus-adapter "$(module_version prometheus-adapter sigs.k8s.io/prometheus-adapter)" "-s -w" \
  sigs.k8s.io/prometheus-adapter/cmd/adapter
# KEDA (its operator and its external-metrics adapter, one go build) scales job pools from zero,
# with the scalers of the operator's triggers only (keda/trim.sh). Its CRDs come from the same
# module, checked against the pinned module hash.
keda_version=$(module_version keda github.com/kedacore/keda/v2)
keda_sum="h1:R6z2HZvstK4RLUMxroNACzBj74xGxt3kG59b5Xc+Xps="
if wanted keda; then
  keda_module=github.com/kedacore/keda/v2@$keda_version
  got_sum=$(module_info "$here/keda" "$keda_module" Sum)
  [ "$got_sum" = "$keda_sum" ] || { echo "KEDA $keda_version: module hash $got_sum, expected $keda_sum" >&2; exit 1; }
  keda_dir=$(module_info "$here/keda" "$keda_module" Dir)
  rm -rf "$bin/keda-crds"
  mkdir -p "$bin/keda-crds"
  cp "$keda_dir"/config/crd/bases/*.yaml "$bin/keda-crds/"
  chmod -R u+w "$bin/keda-crds"
  # The trimmed source beside a copy of the wrapper's go.mod that builds from it, keyed by what
  # makes it, so the stamp of the build below (which names this go.mod) covers the trimming.
  keda_source="$cache/go/keda-source-$keda_version-$(cat "$here/keda/trim.sh" "$here/keda/triggers" |
    sha256sum | cut -c1-12)"
  if [ ! -f "$keda_source/.complete" ]; then
    mkdir -p "$cache/go"
    find "$cache/go" -maxdepth 1 -name "keda-source-*" -exec rm -rf {} +
    mkdir -p "$keda_source"
    "$here/keda/trim.sh" "$keda_dir" "$keda_source/src"
    cp "$here/keda/go.mod" "$here/keda/go.sum" "$keda_source/"
    (cd "$here/keda" && go mod edit -replace "github.com/kedacore/keda/v2=$keda_source/src" "$keda_source/go.mod")
    touch "$keda_source/.complete"
  fi
  # In a folder of their own: "operator" and "adapter" are too plain for the shared bin folder.
  MODFILE="$keda_source/go.mod" LINK_DIR="$bin/keda" build keda "$keda_version" \
    "-s -w -X=github.com/kedacore/keda/v2/version.Version=${keda_version#v}" \
    github.com/kedacore/keda/v2/cmd/operator github.com/kedacore/keda/v2/cmd/adapter
fi
# Karpenter's go.mod asks for Go >= 1.26.9: this one build uses go1.27.3, which the Go proxy serves.
karpenter_toolchain=go1.27.3
TOOLCHAIN=$karpenter_toolchain build karpenter "$(module_version karpenter sigs.k8s.io/karpenter)" "-s -w" \
  sigs.k8s.io/karpenter/kwok
# Its CRDs and the chart whose RBAC the tests render, from the same module.
if wanted karpenter; then
  karpenter_dir=$(TOOLCHAIN=$karpenter_toolchain module_dir karpenter sigs.k8s.io/karpenter)
  # Assembled aside and swapped in, so a failed copy never leaves the folder half there.
  rm -rf "$bin/karpenter-kwok.new"
  mkdir -p "$bin/karpenter-kwok.new/crds"
  cp "$karpenter_dir"/kwok/charts/crds/*.yaml "$karpenter_dir/kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml" \
    "$bin/karpenter-kwok.new/crds/"
  cp -r "$karpenter_dir/kwok/charts" "$bin/karpenter-kwok.new/chart"
  chmod -R u+w "$bin/karpenter-kwok.new"
  rm -rf "$bin/karpenter-kwok"
  mv "$bin/karpenter-kwok.new" "$bin/karpenter-kwok"
fi

# kwok >= 0.8 has no built-in stages: assemble the fast node/pod lifecycle from its module.
if wanted kwok; then
  kwok_dir=$(module_dir kwok sigs.k8s.io/kwok)
  for stage in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
    pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
    echo "---"
    cat "$kwok_dir/kustomize/stage/$stage.yaml"
  done > "$bin/kwok-stages.yaml"
fi
wait
if [ -n "$(ls -A "$failed")" ]; then
  echo "build.sh: failed to build: $(ls "$failed" | tr '\n' ' ')" >&2
  exit 1
fi
echo "$bin"
