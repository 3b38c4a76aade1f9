#!/usr/bin/env bash
# Fetches the Debian packages a lock file pins (exact versions through apt, each checked against
# the lock's sha256) into a pool under the cache, and lays them out as an apt repository of that
# lock's packages only (suite as the lock says, component main), for mmdebstrap. Prints the
# repository folder on the last line of stdout.
#   images/fetch-debs.sh images/gotenberg/packages.lock
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=images/debs.sh
. "$here/debs.sh"
lock=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
[ -f "$lock" ] || { echo "fetch-debs: no lock file $1" >&2; exit 1; }
cache=${RENDERPOOL_CACHE:-$HOME/.cache/renderpool}
pool=$(debs_pool)
name=$(basename "$(dirname "$lock")")
repo="$cache/debs/$name-$(sha256sum "$lock" | cut -c1-12)"
mkdir -p "$pool"
# One fetch at a time per cache: each one's clean-up below deletes the pool files no repository
# links yet, which a fetch beside it has just moved in (images/build.sh fetches Gotenberg's
# packages beside its other work).
exec 8>"$cache/debs/.lock"
flock 8

if [ ! -f "$repo/.complete" ]; then
  wanted=()
  while read -r pkg version arch _; do
    [ -f "$pool/$(debs_file "$pkg" "$version" "$arch")" ] || wanted+=("$pkg=$version")
  done < <(debs_lock_entries "$lock")
  if [ ${#wanted[@]} -gt 0 ]; then
    echo "fetch-debs: downloading ${#wanted[@]} pinned packages for $name" >&2
    incoming=$(mktemp -d "$pool/.incoming.XXXXXX")
    trap 'rm -rf "$incoming"' EXIT
    debs_download "$incoming" "${wanted[@]}"
  fi
  suite=$(debs_lock_suite "$lock")
  index="$repo/dists/$suite/main/binary-$(dpkg --print-architecture)"
  rm -rf "$repo"
  mkdir -p "$repo/pool" "$index"
  while read -r pkg version arch sha; do
    file=$(debs_file "$pkg" "$version" "$arch")
    if [ ! -f "$pool/$file" ]; then
      [ -f "${incoming:-}/$file" ] || { echo "fetch-debs: apt gave no $file for $pkg $version" >&2; exit 1; }
      mv "$incoming/$file" "$pool/$file"
    fi
    echo "$sha  $pool/$file" | sha256sum --check --quiet - >&2 || {
      rm -f "$pool/$file"
      echo "fetch-debs: $pkg $version does not match the sha256 pinned in $lock" >&2
      exit 1
    }
    ln "$pool/$file" "$repo/pool/$file"
  done < <(debs_lock_entries "$lock")
  (cd "$repo" && dpkg-scanpackages --multiversion pool /dev/null >"$index/Packages" 2>/dev/null)
  # mmdebstrap finds the essential set through the suite's Release; apt checks the index
  # against it (the repository itself is trusted: its files were checked against the lock).
  {
    echo "Suite: $suite"
    echo "Codename: $suite"
    echo "Components: main"
    echo "Architectures: $(dpkg --print-architecture)"
    echo "SHA256:"
    echo " $(sha256sum <"$index/Packages" | cut -d' ' -f1) $(stat -c %s "$index/Packages") main/binary-$(dpkg --print-architecture)/Packages"
  } >"$repo/dists/$suite/Release"
  touch "$repo/.complete"
  # One repository per lock name; pool files no repository links are gone with it.
  find "$cache/debs" -maxdepth 1 -name "$name-*" ! -path "$repo" -exec rm -rf {} +
  find "$pool" -maxdepth 1 -name '*.deb' -links 1 -delete
fi
echo "$repo"
