# renderpool-operator image recipe (sourced by build.sh with its inputs set; see build.sh; the
# config is the Containerfile's).
# Layers: the base (libraries the binary needs, users) and the binary, on PATH so the chart's
# `command: [renderpool-operator]` finds it. Runs as nonroot (65532) with a read-only root.

# shellcheck source=images/base/stage.sh
. "$images/base/stage.sh"

recipe_inputs() {
  base_inputs
  printf '%s\n' "$images/renderpool-operator/recipe.sh" "$release_bin/renderpool-operator"
}

recipe_build() { # LAYOUT TAG WORK
  local layout=$1 tag=$2 work=$3
  oci_new "$layout" "$tag"
  base_stage "$base_repo" "$work/base" "$release_bin/renderpool-operator"
  oci_tar "$work/base" "$work/base.tar"
  oci_add_layer "$layout" "$tag" "$work/base.tar" "base: glibc and libgcc_s from Debian, users"

  install -D -m 0755 "$release_bin/renderpool-operator" "$work/bin/usr/local/bin/renderpool-operator"
  oci_tar "$work/bin" "$work/bin.tar"
  oci_add_layer "$layout" "$tag" "$work/bin.tar" "renderpool-operator $VERSION"
}
