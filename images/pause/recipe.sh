# pause image recipe (sourced by build.sh with its inputs set; see build.sh; the config is the
# Containerfile's): the sandbox image the real-node tests pin in containerd. One static binary, run as 65535 like Kubernetes' own.

recipe_inputs() {
  printf '%s\n' "$images/pause/"{recipe.sh,compile.sh,pause.c}
  # The compiler and the static glibc decide the bytes too.
  gcc --version | head -n 1
  dpkg-query -W -f='libc6-dev ${Version}\n' libc6-dev
}

recipe_build() { # LAYOUT TAG WORK
  local layout=$1 tag=$2 work=$3
  oci_new "$layout" "$tag"
  "$images/pause/compile.sh" "$work/root/pause"
  oci_tar "$work/root" "$work/pause.tar"
  oci_add_layer "$layout" "$tag" "$work/pause.tar" "pause (static, from images/pause/pause.c)"
}
