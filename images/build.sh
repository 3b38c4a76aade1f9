#!/usr/bin/env bash
# Builds the project's container images as OCI image archives (a tar of an OCI image layout:
# `ctr images import`, `docker load`, `podman load` and skopeo read it) without a container
# engine: Debian packages at pinned versions, umoci to assemble, every timestamp fixed, so the
# same inputs give the same digests. Each image is cached outside the checkout, keyed by all it
# is made from, so a warm run takes seconds.
#   images/build.sh                      # every image, into a folder under the cache
#   images/build.sh --out DIR            # into DIR
#   images/build.sh --rebuild --out DIR  # ignore the image cache (the binaries, .debs and
#                                        # libpdfium.so they are made from are still reused)
# Prints "name digest size" per image, then the output folder on the last line of stdout. The
# folder holds <image>.tar per image and images.tsv (name, file, digest, bytes).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
images="$root/images"
cache=${RENDERPOOL_CACHE:-$HOME/.cache/renderpool}
# The images' one timestamp: files, history and created fields (2026-12-01T00:00:00Z).
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1796083200}
export LC_ALL=C

out= rebuild=false
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$(mkdir -p "$2" && cd "$2" && pwd); shift 2 ;;
    --rebuild) rebuild=true; shift ;;
    *) echo "images/build.sh: unknown argument $1 (see the header of this script)" >&2; exit 2 ;;
  esac
done
$rebuild && [ -z "$out" ] && { echo "images/build.sh: --rebuild needs --out DIR" >&2; exit 2; }

missing=()
for tool in umoci:umoci mmdebstrap:mmdebstrap jq:jq dpkg-scanpackages:dpkg-dev readelf:binutils \
  gcc:build-essential cmake:cmake nasm:nasm flock:util-linux; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
done
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || missing+=(libc6-dev)
if [ ${#missing[@]} -gt 0 ]; then
  echo "images/build.sh: missing tools; install them with: apt-get install ${missing[*]}" >&2
  echo "(scripts/setup.sh --images does that)" >&2
  exit 1
fi

# shellcheck source=images/oci.sh
. "$images/oci.sh"
# shellcheck source=images/debs.sh
. "$images/debs.sh"

mkdir -p "$cache/images/build"
# One build at a time per cache: builds share the source copy and target dir of the binaries.
exec 9>"$cache/images/.lock"
flock 9
# What a build that failed or was killed left behind.
rm -rf "$cache/images/build"/.work-* "$cache/images/build"/*.tmp

VERSION=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/charts/renderpool-operator/Chart.yaml")
# GOTENBERG_VERSION and PYPDFIUM2_VERSION, among the other pins.
# shellcheck source=versions.env
. "$root/versions.env"

# The recipe folders and the names the images carry; the names are the project's contract
# (chart, CRD defaults, the real-node tests).
declare -A ref=(
  [render-pod]="ghcr.io/renderpool/render-pod:$VERSION"
  [renderpool-operator]="ghcr.io/renderpool/renderpool-operator:$VERSION"
  [gotenberg]="ghcr.io/renderpool/gotenberg-libreoffice:$GOTENBERG_VERSION"
  [pause]="renderpool.dev/test/pause:1"
)
order=(render-pod renderpool-operator gotenberg pause)

# What the recipes are made from (each recipe names the ones it uses in recipe_inputs).
# Gotenberg's Debian packages download while the release binaries compile (on a cold machine,
# 15 s of that image's 162 s; the rest is dpkg and compression, after the compile).
"$images/fetch-debs.sh" "$images/gotenberg/packages.lock" >/dev/null &
gotenberg_debs=$!
release_bin=$("$images/release-binaries.sh" | tail -n 1)
wait "$gotenberg_debs"
pdfium_lib=$("$root/scripts/fetch-pdfium.sh" | tail -n 1)
base_repo=$("$images/fetch-debs.sh" "$images/base/packages.lock" | tail -n 1)
gotenberg_bin=$(readlink -f "$("$root/tests/cluster/build.sh" gotenberg | tail -n 1)/gotenberg-libreoffice")
gotenberg_bin=$(dirname "$gotenberg_bin")
export VERSION GOTENBERG_VERSION PYPDFIUM2_VERSION

# image_key IMAGE: a hash over the recipe's inputs (file contents, or text such as a tool's
# version), the shared scripts and tools, the name and the timestamp.
image_key() {
  {
    echo "$1 ${ref[$1]} $SOURCE_DATE_EPOCH"
    sha256sum "$images/build.sh" "$images/oci.sh" "$images/debs.sh" "$images/$1/Containerfile" | cut -d' ' -f1
    umoci --version
    tar --version | head -n 1
    (. "$images/$1/recipe.sh" && recipe_inputs) | while IFS= read -r item; do
      if [ -f "$item" ]; then sha256sum <"$item"; else echo "$item"; fi
    done
  } | sha256sum | cut -c1-16
}

# build_image IMAGE DEST: builds the archive DEST/image.tar and DEST/digest: the recipe's
# layers, the Containerfile's config, the version and creation labels.
build_image() {
  local image=$1 dest=$2 tag=${ref[$1]##*:}
  local work config
  work=$(mktemp -d "$cache/images/build/.work-$image.XXXXXX")
  config=$(oci_containerfile_config "$images/$image/Containerfile")
  mapfile -t config <<<"$config"
  (
    # shellcheck source=/dev/null
    . "$images/$image/recipe.sh"
    recipe_build "$work/layout" "$tag" "$work"
  ) >&2
  oci_config "$work/layout" "$tag" "${config[@]}" \
    --config.label="org.opencontainers.image.version=$tag" \
    --config.label="org.opencontainers.image.created=$(oci_time)" >&2
  oci_archive "$work/layout" "$tag" "${ref[$image]}" "$dest/image.tar" >&2
  oci_manifest_digest "$work/layout" >"$dest/digest"
  rm -rf "$work"
}

summary=()
keys=
for image in "${order[@]}"; do
  key=$(image_key "$image")
  keys+=$key
  if $rebuild; then
    dest="$out/.build-$image"
    rm -rf "$dest"
  else
    dest="$cache/images/build/$image-$key"
  fi
  if $rebuild || [ ! -f "$dest/.complete" ]; then
    echo "images: building $image (${ref[$image]})" >&2
    start=$SECONDS
    rm -rf "$dest.tmp"
    mkdir -p "$dest.tmp"
    build_image "$image" "$dest.tmp"
    touch "$dest.tmp/.complete"
    rm -rf "$dest"
    mv "$dest.tmp" "$dest"
    echo "images: built $image in $((SECONDS - start))s" >&2
    # Keep the three newest builds of each image.
    $rebuild || ls -dt "$cache/images/build/$image"-* | tail -n +4 | xargs -r rm -rf
  fi
  touch "$dest"
  summary+=("$image $dest")
done

if [ -z "$out" ]; then
  out="$cache/images/out-$(echo "$keys" | sha256sum | cut -c1-16)"
  mkdir -p "$out"
  touch "$out"
  ls -dt "$cache/images"/out-* | tail -n +4 | xargs -r rm -rf
fi
: >"$out/images.tsv.tmp"
for entry in "${summary[@]}"; do
  image=${entry%% *} dest=${entry#* }
  digest=$(cat "$dest/digest")
  [ "$dest/image.tar" -ef "$out/$image.tar" ] || ln -f "$dest/image.tar" "$out/$image.tar"
  bytes=$(stat -c %s "$out/$image.tar")
  printf '%s\t%s\t%s\t%s\n' "${ref[$image]}" "$image.tar" "$digest" "$bytes" >>"$out/images.tsv.tmp"
  printf '%-48s %s %s\n' "${ref[$image]}" "$digest" "$(numfmt --to=iec-i --suffix=B --format=%.1f "$bytes")"
done
mv "$out/images.tsv.tmp" "$out/images.tsv"
$rebuild && rm -rf "$out"/.build-*
echo "$out"
