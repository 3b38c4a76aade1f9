//! Gotenberg, as the render pods call it and the operator runs it.

use crate::versions;

/// Gotenberg's API port: the `--api-port` the operator passes, its Service's port, and the
/// image's `EXPOSE` (Gotenberg's own default).
pub const PORT: u16 = 3000;

/// The LibreOffice-only Gotenberg image `images/build.sh` builds: the operator's default.
pub fn image() -> String {
    format!("ghcr.io/renderpool/gotenberg-libreoffice:{}", versions::GOTENBERG)
}
