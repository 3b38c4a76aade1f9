#!/bin/sh
# Compiles pause.c into the static binary OUT (used by recipe.sh and the Containerfile alike).
set -eu
src=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$(dirname "$1")"
gcc -static -Os -s -Wall -Wextra -Werror -ffile-prefix-map="$src=." -o "$1" "$src/pause.c"
chmod 0755 "$1"
