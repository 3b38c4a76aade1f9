#!/usr/bin/env bash
# Builds the release render-pod and renderpool-operator binaries for the images, reproducibly:
# from a copy of the checkout at a fixed path under the cache, into a target dir of its own, with
# every build path remapped, so the bytes depend on the sources and the toolchain only (not on
# where the checkout or $CARGO_HOME live), and the workspace's own builds stay untouched.
# Prints the folder holding both binaries on the last line of stdout.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${RENDERPOOL_CACHE:-$HOME/.cache/renderpool}
src="$cache/images/src"
target="$cache/images/cargo-target"
cargo_home=${CARGO_HOME:-$HOME/.cargo}
export LC_ALL=C

git -C "$root" rev-parse --git-dir >/dev/null 2>&1 || {
  echo "release-binaries: $root is not a git checkout (the copy lists files with git)" >&2
  exit 1
}
# Tracked and untracked-but-not-ignored files as they are on disk (a deleted file is skipped).
list=$(mktemp)
trap 'rm -f "$list"' EXIT
# fuzz/ is no part of the images (and a running fuzzer adds and removes corpus files).
git -C "$root" ls-files -z --cached --others --exclude-standard -- . ':!fuzz' |
  while IFS= read -r -d '' f; do [ -e "$root/$f" ] || [ -L "$root/$f" ] && printf '%s\0' "$f"; done |
  sort -z -u >"$list"
mkdir -p "$src"
# tar keeps mtimes, so cargo sees unchanged files as unchanged.
tar -C "$root" --null -T "$list" -cf - | tar -C "$src" -xf -
# Files gone from the checkout go from the copy too.
(cd "$src" && find . -type f -printf '%P\0' -o -type l -printf '%P\0' | sort -z) |
  comm -z -23 - "$list" | (cd "$src" && xargs -0 -r rm -f)

maps=("$src=/renderpool" "$cargo_home=/cargo" "$target=/target")
flags=("${maps[@]/#/--remap-path-prefix=}")
CARGO_ENCODED_RUSTFLAGS=$(IFS=$'\x1f'; echo "${flags[*]}")
# C and assembly that build scripts compile (ring, blake3) get the same maps.
CFLAGS="${maps[*]/#/-ffile-prefix-map=}"
CXXFLAGS=$CFLAGS
# A clean environment: build scripts track variables (a cargo test's CARGO_* ones, say), and any
# change would rebuild; only what finds the toolchain and the registry is passed.
(cd "$src" && env -i PATH="$PATH" HOME="$HOME" CARGO_HOME="$cargo_home" \
  ${RUSTUP_HOME:+RUSTUP_HOME="$RUSTUP_HOME"} ${RUSTUP_TOOLCHAIN:+RUSTUP_TOOLCHAIN="$RUSTUP_TOOLCHAIN"} \
  LC_ALL=C CARGO_TARGET_DIR="$target" CARGO_ENCODED_RUSTFLAGS="$CARGO_ENCODED_RUSTFLAGS" \
  CFLAGS="$CFLAGS" CXXFLAGS="$CXXFLAGS" \
  cargo build --release --locked --quiet -p render-pod -p renderpool-operator \
  --bin render-pod --bin renderpool-operator >&2)
# NASM (libjpeg-turbo's SIMD code) writes each source's absolute path as the object's FILE
# symbol, and has no option to map it: those symbols name $CARGO_HOME, and nothing reads them.
for bin in render-pod renderpool-operator; do
  strip_args=()
  while IFS= read -r name; do
    for map in "${maps[@]}"; do
      [[ $name == "${map%%=*}"/* ]] && strip_args+=("--strip-symbol=$name") && break
    done
  done < <(readelf -sW "$target/release/$bin" | awk '$4 == "FILE" { print $8 }' | sort -u)
  [ ${#strip_args[@]} -eq 0 ] || objcopy "${strip_args[@]}" "$target/release/$bin"
done
echo "$target/release"
