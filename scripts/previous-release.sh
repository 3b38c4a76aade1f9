#!/usr/bin/env bash
# The previous chart release, for the upgrade test: its chart, its real-node example and its
# images, built from the commit versions.env pins (PREVIOUS_RELEASE_COMMIT, tagged
# PREVIOUS_RELEASE_TAG) with that commit's own images/build.sh, so they hold what that release
# shipped: its code, chart and image layout. Its binaries are compiled with a quicker profile than
# the release's (opt-level 1, no LTO; `quick_profile` below): the upgrade test needs the
# release's behaviour, not its speed, and on a cold machine the release profile took 800 s of CPU
# while the tests waited for the Go tools beside it. Cached by commit and profile outside the
# checkout: only the first run builds.
#   scripts/previous-release.sh   # prints the folder on the last line of stdout:
#     chart/                      the chart as released
#     renderpool-real-node.yaml   the release's real-node example
#     images/                     its OCI image archives and images.tsv (images/build.sh --out)
#     node-images/                the two whose names carry the release's version (render-pod,
#                                 renderpool-operator), as <image>-previous.tar: what a real
#                                 node imports beside this checkout's images
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${RENDERPOOL_CACHE:-$HOME/.cache/renderpool}
# shellcheck source=versions.env
. "$root/versions.env"
commit=$PREVIOUS_RELEASE_COMMIT tag=$PREVIOUS_RELEASE_TAG
# The release's [profile.release] begins with the first block; the quick profile replaces it
# with the second.
release_profile=$'[profile.release]\nlto = "thin"\n'
quick_profile=$'[profile.release]\nlto = false\nopt-level = 1\n'
out="$cache/releases/$commit-opt1"
[ -f "$out/.complete" ] && { echo "$out"; exit 0; }

git -C "$root" cat-file -e "$commit^{commit}" 2>/dev/null || {
  echo "previous-release: commit $commit ($tag) is not in this clone; fetch the history" \
    "(git fetch --unshallow, or git fetch origin tag $tag)" >&2
  exit 1
}
# A tag that moved would make "the previous release" mean two things.
if tagged=$(git -C "$root" rev-parse -q --verify "refs/tags/$tag^{commit}"); then
  [ "$tagged" = "$commit" ] || {
    echo "previous-release: tag $tag is $tagged, but versions.env pins $commit" >&2
    exit 1
  }
fi

mkdir -p "$cache/releases"
exec 8>"$cache/releases/.lock"
flock 8
[ -f "$out/.complete" ] && { echo "$out"; exit 0; }
rm -rf "$cache/releases"/.work-*
work=$(mktemp -d "$cache/releases/.work-XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$SECONDS
# The commit's files alone, as a checkout of its own (images/build.sh lists files with git):
# nothing of this clone's work tree, index or worktree list is touched.
mkdir "$work/src"
git -C "$root" archive "$commit" | tar -x -C "$work/src"
# git archive dates every file at the commit; cargo decides a workspace crate is fresh by mtime,
# so files dated now are what makes it compile them, not reuse a build of other sources.
find "$work/src" -exec touch -h {} +
git -C "$work/src" init -q
git -C "$work/src" add -A
# A cache root of its own for the images' source copy, target dir and image cache. The main
# cache's are shared by every build of this checkout's images: a build of other sources there
# makes the next build of this checkout compile the workspace again, and a checkout of the same
# version as the release (a branch not yet bumped) could take its crates as fresh by their
# mtimes. It stays between builds, at a fixed path: the release binaries' flags name the target
# dir (--remap-path-prefix), so a target dir copied elsewhere would compile everything anyway,
# and the next previous release compiles only what changed. The downloads (.debs, libpdfium.so)
# and the Go tools are the main cache's.
private="$cache/releases/cache"
mkdir -p "$private"
for shared in debs pdfium bin go; do
  mkdir -p "$cache/$shared"
  [ -L "$private/$shared" ] || ln -s "$cache/$shared" "$private/$shared"
done
# Only the two images whose names carry the release's version are ever imported (node-images/
# below); its Gotenberg and pause images are this checkout's by name, and Gotenberg's alone
# costs minutes cold (its Debian packages). The release's script is narrowed to the two, and
# refused if its list of images is not the one this narrowing knows.
narrowed='order=(render-pod renderpool-operator)'
sed -i "s/^order=(render-pod renderpool-operator gotenberg pause)\$/$narrowed/" "$work/src/images/build.sh"
grep -qxF "$narrowed" "$work/src/images/build.sh" || {
  echo "previous-release: $tag's images/build.sh lists other images; update this script" >&2
  exit 1
}
toml=$(cat "$work/src/Cargo.toml"; echo .)
toml=${toml%.}
after=${toml#*"$release_profile"}
[ "$after" != "$toml" ] && [[ $after != *"$release_profile"* ]] || {
  echo "previous-release: $tag's Cargo.toml has no one [profile.release] as this script knows it; update it" >&2
  exit 1
}
printf '%s' "${toml/"$release_profile"/"$quick_profile"}" >"$work/src/Cargo.toml"
echo "previous-release: building $tag ($commit) images" >&2
RENDERPOOL_CACHE=$private "$work/src/images/build.sh" --out "$work/images" >&2
mkdir "$work/node-images"
for image in render-pod renderpool-operator; do
  ln "$work/images/$image.tar" "$work/node-images/$image-previous.tar"
done
cp -r "$work/src/charts/renderpool-operator" "$work/chart"
cp "$work/src/examples/renderpool-real-node.yaml" "$work/"
rm -rf "$work/src" "$out"
touch "$work/.complete"
mv "$work" "$out"
trap - EXIT
echo "previous-release: $tag built in $((SECONDS - start))s" >&2
echo "$out"
