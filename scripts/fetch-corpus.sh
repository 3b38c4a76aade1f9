#!/usr/bin/env bash
# Fetches the test documents that testdata/corpus.json pins (Debian packages by version, PyPI
# source distributions by file, each checked against its sha256), extracts the listed files,
# makes the generated bad cases, checks every file against its sha256 in the lock, and caches the
# folder outside the checkout, keyed by the lock's hash. A warm run fetches nothing and re-checks
# every file (a fraction of a second). A missing or different file fails, naming it.
# Prints the corpus folder on the last line of stdout. Tests read it from RENDERPOOL_CORPUS.
#   scripts/fetch-corpus.sh           fetch or check, print the folder
#   scripts/fetch-corpus.sh --where   print the folder this lock is cached in, fetch nothing
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lock="$root/testdata/corpus.json"
cache=${RENDERPOOL_CACHE:-$HOME/.cache/renderpool}
dest="$cache/corpus/$(sha256sum "$lock" | cut -c1-16)"

if [ "${1:-}" != "--where" ]; then
  python3 "$root/scripts/corpus.py" "$lock" "$dest" >&2
fi
echo "$dest"
