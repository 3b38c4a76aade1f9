# Pinned Debian packages, shared by fetch-debs.sh and lock-debs.sh (sourced, not run).
# A lock file has one package a line: "name version arch sha256"; "#" starts a comment, and a
# "# suite: NAME" line names the Debian suite the versions come from.

# Where verified .deb files are kept, shared by every lock.
debs_pool() { echo "${RENDERPOOL_CACHE:-$HOME/.cache/renderpool}/debs/pool"; }

# The file name apt-get download gives a package (an epoch's colon becomes %3a).
debs_file() { echo "$1_${2//:/%3a}_$3.deb"; }

# debs_download DIR name=version...: downloads the exact versions into DIR with apt. If the
# local lists lack one, refreshes them once; a version the mirror no longer serves fails naming
# every such package.
debs_download() {
  local dir=$1; shift
  [ $# -gt 0 ] || return 0
  local apt=(apt-get -qq -o APT::Sandbox::User=root -o Dpkg::Use-Pty=0)
  if (cd "$dir" && "${apt[@]}" download "$@" >&2 2>/dev/null); then return 0; fi
  echo "debs: refreshing the package lists (apt-get update)" >&2
  "${apt[@]}" update >&2
  if (cd "$dir" && "${apt[@]}" download "$@" >&2); then return 0; fi
  local spec missing=()
  for spec; do
    apt-cache show "$spec" >/dev/null 2>&1 || missing+=("${spec%%=*} ${spec#*=}")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "debs: the Debian mirror no longer serves these pinned versions:" >&2
    printf '  %s\n' "${missing[@]}" >&2
    echo "debs: re-pin with images/lock-debs.sh (docs/images.md)" >&2
  fi
  return 1
}

# debs_lock_entries LOCK: the lock's package lines, comments and blanks dropped.
debs_lock_entries() { grep -v -e '^#' -e '^[[:space:]]*$' "$1"; }

# debs_lock_suite LOCK: the Debian suite the lock was pinned from.
debs_lock_suite() {
  local suite
  suite=$(sed -n 's/^# suite: //p' "$1")
  [ -n "$suite" ] || { echo "debs: $1 has no '# suite: NAME' line" >&2; return 1; }
  echo "$suite"
}
