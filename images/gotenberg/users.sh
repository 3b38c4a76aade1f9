#!/bin/sh
# The official image's user under the root $1: gotenberg (uid and gid 1001, shell bash,
# HOME /home/gotenberg), also in group root with its home group-writable, so an arbitrary
# UID in group 0 (OpenShift) can use it. Lines are written directly, with no dates in them.
set -eu
root=$1
echo 'gotenberg:x:1001:1001::/home/gotenberg:/bin/bash' >>"$root/etc/passwd"
echo 'gotenberg:!::0:99999:7:::' >>"$root/etc/shadow"
sed -i 's/^root:x:0:$/root:x:0:gotenberg/' "$root/etc/group"
echo 'gotenberg:x:1001:' >>"$root/etc/group"
if [ -f "$root/etc/gshadow" ]; then
  sed -i 's/^root:\*::$/root:*::gotenberg/' "$root/etc/gshadow"
  echo 'gotenberg:!::' >>"$root/etc/gshadow"
fi
install -d -m 0775 -o 1001 -g 0 "$root/home/gotenberg"
