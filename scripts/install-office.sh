#!/usr/bin/env bash
# Installs what a local Gotenberg needs from Debian when it is missing: LibreOffice without a GUI
# (Writer, Calc, Impress and its Python bridge), unoconv (which plays Gotenberg's unoconverter,
# images/gotenberg/unoconverter), the PDF engines Gotenberg checks for at start (qpdf, pdftk,
# exiftool) and metric-compatible fonts. Idempotent: a warm machine only asks dpkg.
set -euo pipefail
packages=(
  libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui python3-uno unoconv
  qpdf pdftk-java libimage-exiftool-perl
  fonts-crosextra-carlito fonts-crosextra-caladea fonts-liberation2 fonts-dejavu-core
)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-office: installing ${missing[*]} (about 1 minute, 320 MiB)" >&2
  start=$SECONDS
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  echo "install-office: done in $((SECONDS - start))s" >&2
fi
