# render-pod image recipe (sourced by build.sh with its inputs set; see build.sh; the config is
# the Containerfile's).
# Layers: the base (libraries the binary and libpdfium.so need, users), libpdfium.so, the
# binary. Runs as nonroot (65532) and writes nothing outside /tmp.

# shellcheck source=images/base/stage.sh
. "$images/base/stage.sh"

# Where the Containerfile's PDFIUM_LIB_PATH says libpdfium.so is.
PDFIUM_PATH=$(sed -n 's/^ENV PDFIUM_LIB_PATH=//p' "$images/render-pod/Containerfile")

recipe_inputs() {
  base_inputs
  printf '%s\n' "$images/render-pod/recipe.sh" "$release_bin/render-pod" "$pdfium_lib"
}

recipe_build() { # LAYOUT TAG WORK
  local layout=$1 tag=$2 work=$3
  oci_new "$layout" "$tag"
  base_stage "$base_repo" "$work/base" "$release_bin/render-pod" "$pdfium_lib"
  oci_tar "$work/base" "$work/base.tar"
  oci_add_layer "$layout" "$tag" "$work/base.tar" "base: glibc and libgcc_s from Debian, users"

  install -D -m 0644 "$pdfium_lib" "$work/pdfium$PDFIUM_PATH"
  oci_tar "$work/pdfium" "$work/pdfium.tar"
  oci_add_layer "$layout" "$tag" "$work/pdfium.tar" "libpdfium.so (pypdfium2 $PYPDFIUM2_VERSION)"

  install -D -m 0755 "$release_bin/render-pod" "$work/bin/usr/local/bin/render-pod"
  oci_tar "$work/bin" "$work/bin.tar"
  oci_add_layer "$layout" "$tag" "$work/bin.tar" "render-pod $VERSION"
}
