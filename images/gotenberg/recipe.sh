# Gotenberg image recipe (sourced by build.sh with its inputs set; see build.sh; the config is
# the Containerfile's). Gotenberg's LibreOffice-only command over Debian's LibreOffice, started
# as the official gotenberg/gotenberg image starts: tini as PID 1 running `gotenberg`, user
# gotenberg (1001:1001, also in group root for arbitrary UIDs), HOME and working dir
# /home/gotenberg, port 3000, the same tool paths and OpenTelemetry exporters off. Only the
# Chromium flags, which this command lacks, differ. Layers: the Debian root (mmdebstrap from
# the pinned packages), then gotenberg, pdfcpu and the unoconverter shim.

recipe_inputs() {
  printf '%s\n' "$images/gotenberg/"{recipe.sh,users.sh,reproducible.sh,packages,packages.lock,unoconverter} \
    "$gotenberg_bin/gotenberg-libreoffice" "$gotenberg_bin/pdfcpu"
  mmdebstrap --version
}

# The Debian root as a reproducible tar: the essential set plus images/gotenberg/packages, all
# from a repository holding the pinned versions only, with no documentation but copyrights
# (man1 stays as an empty folder: Java's postinst links its man page there).
_gotenberg_root() { # REPO OUT WORK
  local repo=$1 out=$2 work=$3
  local lock=$images/gotenberg/packages.lock
  mapfile -t wanted < <(grep -v -e '^#' -e '^[[:space:]]*$' "$images/gotenberg/packages")
  # shellcheck disable=SC2016 # "$1" is the root mmdebstrap passes to each hook
  TMPDIR=$work mmdebstrap --quiet --variant=essential --mode=root --format=tar \
    --include="$(IFS=,; echo "${wanted[*]}")" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --setup-hook='mkdir -p "$1/usr/share/man/man1"' \
    --customize-hook="chroot \"\$1\" dpkg-query -W -f='\${Package} \${Version} \${Architecture}\n' | sort >'$work/installed'" \
    --customize-hook="$images/gotenberg/users.sh \"\$1\"" \
    --customize-hook='rm -f "$1/etc/hostname" "$1/etc/resolv.conf" "$1/etc/apt/sources.list"' \
    --customize-hook="$images/gotenberg/reproducible.sh \"\$1\"" \
    "$(debs_lock_suite "$lock")" "$out" "deb [trusted=yes] copy://$repo $(debs_lock_suite "$lock") main"
  # The lock must be the whole closure: what got installed is exactly what it pins.
  if ! diff <(debs_lock_entries "$lock" | cut -d' ' -f1-3 | sort) "$work/installed" >&2; then
    echo "gotenberg: the installed packages differ from $lock (< pinned, > installed): re-pin with images/lock-debs.sh images/gotenberg" >&2
    return 1
  fi
}

recipe_build() { # LAYOUT TAG WORK
  local layout=$1 tag=$2 work=$3
  local repo
  repo=$("$images/fetch-debs.sh" "$images/gotenberg/packages.lock" | tail -n 1)
  oci_new "$layout" "$tag"
  _gotenberg_root "$repo" "$work/root.tar" "$work"
  oci_add_layer "$layout" "$tag" "$work/root.tar" \
    "Debian $(cut -d' ' -f1 <"$images/gotenberg/packages" | grep -v '^#' | tr '\n' ' ')(pinned in images/gotenberg/packages.lock)"

  mkdir -p "$work/bin/usr/bin"
  install -m 0755 "$gotenberg_bin/gotenberg-libreoffice" "$work/bin/usr/bin/gotenberg"
  install -m 0755 "$gotenberg_bin/pdfcpu" "$work/bin/usr/bin/pdfcpu"
  install -m 0755 "$images/gotenberg/unoconverter" "$work/bin/usr/bin/unoconverter"
  oci_tar "$work/bin" "$work/bin.tar"
  oci_add_layer "$layout" "$tag" "$work/bin.tar" \
    "gotenberg-libreoffice $GOTENBERG_VERSION as /usr/bin/gotenberg, pdfcpu, unoconverter (unoconv shim)"
}
