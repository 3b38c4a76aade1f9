#!/usr/bin/env bash
# Fetches libpdfium.so (PDFium build 8149) from the pypdfium2 wheel on PyPI into a cache outside
# the checkout, keyed by version, after checking the wheel against a pinned sha256.
# Prints the library's path on the last line of stdout. Render pods read it from PDFIUM_LIB_PATH.
set -euo pipefail
# PYPDFIUM2_VERSION and PYPDFIUM2_WHEEL_SHA256 (render-pod reads the same version to find the
# library in the cache).
# shellcheck source=versions.env
. "$(dirname "$0")/../versions.env"
cache=${RENDERPOOL_CACHE:-$HOME/.cache/renderpool}
dest="$cache/pdfium/pypdfium2-$PYPDFIUM2_VERSION"
lib="$dest/libpdfium.so"

if [ ! -f "$lib" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  python3 -m pip download --quiet --no-deps --only-binary=:all: \
    --platform manylinux_2_17_x86_64 --python-version 3.11 \
    -d "$work" "pypdfium2==$PYPDFIUM2_VERSION" >&2
  wheel=$(ls "$work"/pypdfium2-*.whl)
  echo "$PYPDFIUM2_WHEEL_SHA256  $wheel" | sha256sum --check --quiet - >&2 || {
    echo "fetch-pdfium: $wheel does not match the pinned sha256 $PYPDFIUM2_WHEEL_SHA256" >&2
    exit 1
  }
  mkdir -p "$dest"
  python3 -m zipfile -e "$wheel" "$work/unpacked" >&2
  install -m 0644 "$work/unpacked/pypdfium2_raw/libpdfium.so" "$lib.tmp"
  mv "$lib.tmp" "$lib"
fi
echo "$lib"
