#!/usr/bin/env bash
# Runs COMMAND in a mount namespace of its own where /tmp and /var/tmp are read-only and STATE,
# the folder it keeps its files in, is writable; everything stays visible, so a checkout or a
# cache under /tmp still reads. For a local LibreOffice: it makes its single-instance pipe
# (OSL_PIPE_<uid>_SingleOfficeIPC_<hash>) in /tmp whatever TMPDIR says, in /var/tmp when /tmp is
# not writable, and only when neither is in the folder of its bootstrap variable OSL_SOCKET_PATH
# (scripts/gotenberg-env.sh sets it inside STATE). Every LibreOffice that Gotenberg kills (a
# conversion past its deadline, a restart) left its pipe in /tmp; here it goes with STATE.
# Without the right to make a mount namespace (not root), COMMAND runs as it is and a line says
# so.
#   scripts/read-only-tmp.sh STATE COMMAND [ARGS...]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: read-only-tmp.sh STATE COMMAND [ARGS...]" >&2; exit 2; }
state=$(realpath -e "$1")
shift
if unshare --mount true 2>/dev/null; then
  # unshare makes the namespace's mounts private: nothing here is seen outside it. A bind mount
  # takes its source's flags, so STATE is made writable again after /tmp's remount.
  exec unshare --mount -- bash -c '
    set -e
    for dir in /tmp /var/tmp; do
      [ -d "$dir" ] || continue
      mount --rbind "$dir" "$dir"
      mount -o remount,bind,ro "$dir"
    done
    mount --bind "$1" "$1"
    mount -o remount,bind,rw "$1"
    shift
    exec "$@"' read-only-tmp "$state" "$@"
fi
echo "read-only-tmp: no mount namespace allowed here: LibreOffice's pipes stay in /tmp" >&2
exec "$@"
