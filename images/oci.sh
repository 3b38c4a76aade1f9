# OCI image layout assembly with umoci, reproducibly (sourced by build.sh, not run).
# Every timestamp is $SOURCE_DATE_EPOCH, layers are tars with sorted names and numeric owners,
# and umoci's gzip writes no time or name, so equal inputs give equal digests.

oci_time() { date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ; }

# oci_tar DIR OUT: a tar of DIR's contents, owners as staged, every mtime $SOURCE_DATE_EPOCH.
oci_tar() {
  tar --sort=name --format=pax --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    -C "$1" -cf "$2" .
}

# oci_new LAYOUT TAG: an empty image in a new layout.
oci_new() {
  umoci init --layout "$1"
  umoci new --image "$1:$2"
}

# oci_add_layer LAYOUT TAG TAR WHAT: appends TAR as a layer, with WHAT as its history entry.
oci_add_layer() {
  umoci raw add-layer --image "$1:$2" --history.created="$(oci_time)" \
    --history.created_by="$4" "$3"
}

# oci_config LAYOUT TAG UMOCI-CONFIG-ARGS...: sets the image config (no history entry).
oci_config() {
  local layout=$1 tag=$2; shift 2
  umoci config --image "$layout:$tag" --no-history --created="$(oci_time)" \
    --architecture=amd64 --os=linux "$@"
}

# oci_archive LAYOUT TAG NAME OUT: drops unreferenced blobs, names the image NAME for
# containerd and Docker (io.containerd.image.name; the OCI ref name stays the tag, as
# `docker save` writes it) and packs the layout into the tar OUT.
oci_archive() {
  local layout=$1 tag=$2 name=$3 out=$4
  umoci gc --layout "$layout"
  jq -c --arg name "$name" \
    '.manifests[0].annotations["io.containerd.image.name"] = $name' \
    "$layout/index.json" >"$layout/index.json.tmp"
  mv "$layout/index.json.tmp" "$layout/index.json"
  chmod -R u=rwX,go=rX "$layout"
  tar --sort=name --format=pax --numeric-owner --owner=0 --group=0 \
    --mtime="@$SOURCE_DATE_EPOCH" --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    -C "$layout" -cf "$out" oci-layout index.json blobs
}

# oci_manifest_digest LAYOUT: the image's digest (its manifest's), as a registry shows it.
oci_manifest_digest() { jq -r '.manifests[0].digest' "$1/index.json"; }

# oci_containerfile_config FILE: umoci config arguments (one a line) for the runtime settings
# of FILE's last stage: USER, ENV, ENTRYPOINT and CMD (JSON form), EXPOSE, WORKDIR, LABEL, one
# setting a line. The Containerfile is the one place these are written, so a Docker build and
# this one cannot disagree on them; an instruction this does not know fails the build.
oci_containerfile_config() {
  local file=$1 instr rest key value port
  # Joins continued lines, then keeps what follows the last FROM.
  awk '/\\$/ { sub(/\\$/, ""); buf = buf $0 " "; next } { print buf $0; buf = "" }' "$file" |
    awk '/^FROM[[:space:]]/ { n = NR } { line[NR] = $0 } END { for (i = n + 1; i <= NR; i++) print line[i] }' |
    while read -r instr rest; do
      case $instr in
        USER) echo "--config.user=$rest" ;;
        ENV)
          key=${rest%%=*} value=${rest#*=}
          value=${value#\"} value=${value%\"}
          echo "--config.env=$key=$value"
          ;;
        ENTRYPOINT) jq -r '.[] | "--config.entrypoint=" + .' <<<"$rest" ;;
        CMD) jq -r '.[] | "--config.cmd=" + .' <<<"$rest" ;;
        EXPOSE) for port in $rest; do echo "--config.exposedports=$port"; done ;;
        WORKDIR) echo "--config.workingdir=$rest" ;;
        LABEL)
          key=${rest%%=*} value=${rest#*=}
          value=${value#\"} value=${value%\"}
          echo "--config.label=$key=$value"
          ;;
        COPY | ARG | "" | \#*) ;;
        *) echo "oci: $file: $instr in the last stage is not understood" >&2; return 1 ;;
      esac
    done
}
