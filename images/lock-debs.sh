#!/usr/bin/env bash
# Pins Debian packages for an image: writes <dir>/packages.lock ("name version arch sha256" a
# line) from the packages named in <dir>/packages, at the versions the mirror serves today.
#   images/lock-debs.sh images/gotenberg   # the packages, their dependencies and the essential set
#   images/lock-debs.sh --exact images/base    # exactly the named packages (files are picked from them)
# Run it when fetch-debs.sh says the mirror no longer serves a pinned version, then rebuild:
# the image digests change with the lock.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=images/debs.sh
. "$here/debs.sh"
exact=false
[ "${1:-}" = "--exact" ] && { exact=true; shift; }
dir=$(cd "$1" && pwd)
suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
mapfile -t wanted < <(grep -v -e '^#' -e '^[[:space:]]*$' "$dir/packages")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if $exact; then
  for pkg in "${wanted[@]}"; do
    apt-cache show --no-all-versions "$pkg" |
      awk -v p="$pkg" '/^Version:/ { v = $2 } /^Architecture:/ { a = $2 } END { print p "\t" v "\t" a }'
  done >"$work/list"
else
  # The closure as apt resolves it into an essential-variant root; the stable suite's updates and
  # security mirrors are added by mmdebstrap itself.
  mmdebstrap --quiet --variant=essential --mode=root --format=null \
    --include="$(IFS=,; echo "${wanted[*]}")" \
    --customize-hook="chroot \"\$1\" dpkg-query -W -f='\${Package}\t\${Version}\t\${Architecture}\n' >'$work/list'" \
    "$suite" /dev/null
fi

mkdir -p "$work/debs"
mapfile -t specs < <(awk -F'\t' '{ print $1 "=" $2 }' "$work/list")
debs_download "$work/debs" "${specs[@]}"
{
  echo "# Pinned by images/lock-debs.sh$($exact && echo ' --exact') on $(date -u +%F): name version arch sha256."
  echo "# suite: $suite"
  sort "$work/list" | while IFS=$'\t' read -r pkg version arch; do
    sha=$(sha256sum "$work/debs/$(debs_file "$pkg" "$version" "$arch")" | cut -d' ' -f1)
    echo "$pkg $version $arch $sha"
  done
} >"$dir/packages.lock"
echo "lock-debs: pinned $(wc -l <"$work/list") packages in $dir/packages.lock" >&2
