#!/usr/bin/env bash
# Prints, one KEY=VALUE a line, the environment a local Gotenberg (gotenberg-libreoffice) runs
# with: its home, config and scratch folders inside STATE_DIR (killed LibreOffice processes leave
# profile folders behind), the folder for LibreOffice's pipes where /tmp is read-only
# (scripts/read-only-tmp.sh), the paths of the tools it checks at start, and telemetry export off.
# Used by scripts/run.sh --office and by the tests' Gotenberg harness, so both run it alike.
#   scripts/gotenberg-env.sh STATE_DIR BIN_DIR     (BIN_DIR holds pdfcpu: tests/cluster/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
state=${1:?usage: gotenberg-env.sh STATE_DIR BIN_DIR}
bin=${2:?usage: gotenberg-env.sh STATE_DIR BIN_DIR}
mkdir -p "$state/home" "$state/config" "$state/tmp"
cat <<ENV
HOME=$state/home
XDG_CONFIG_HOME=$state/config
TMPDIR=$state/tmp
OSL_SOCKET_PATH=$state/tmp
LIBREOFFICE_BIN_PATH=/usr/lib/libreoffice/program/soffice.bin
UNOCONVERTER_BIN_PATH=$root/images/gotenberg/unoconverter
PDFTK_BIN_PATH=/usr/bin/pdftk
QPDF_BIN_PATH=/usr/bin/qpdf
EXIFTOOL_BIN_PATH=/usr/bin/exiftool
PDFCPU_BIN_PATH=$bin/pdfcpu
OTEL_TRACES_EXPORTER=none
OTEL_METRICS_EXPORTER=none
OTEL_LOGS_EXPORTER=none
ENV
