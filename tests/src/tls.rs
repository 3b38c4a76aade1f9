//! A certificate authority of the test's own, and a certificate for 127.0.0.1 signed by it: a
//! server a test starts presents the certificate, and a client trusts the authority only when
//! told to (the render pod through `--objects-ca-file`, as a pool given `objects.caSecretRef`).

use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use render_pod::outbound::StoreConnector;

/// The authority's certificate and the server's certificate and key, as PEM files in a folder
/// removed when dropped.
pub struct TestCa {
    folder: tempfile::TempDir,
}

impl TestCa {
    /// A new authority and a server certificate for `127.0.0.1`.
    pub fn new() -> TestCa {
        let fail = |what: &str, err: rcgen::Error| -> ! { panic!("test CA: {what}: {err}") };
        let ca_key = KeyPair::generate().unwrap_or_else(|e| fail("CA key", e));
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| fail("CA", e));
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "renderpool test CA");
        let ca_cert = ca.self_signed(&ca_key).unwrap_or_else(|e| fail("CA certificate", e));
        let issuer = Issuer::from_params(&ca, &ca_key);
        let key = KeyPair::generate().unwrap_or_else(|e| fail("server key", e));
        let server = CertificateParams::new(vec![crate::LOOPBACK.to_string()])
            .unwrap_or_else(|e| fail("server", e));
        let cert =
            server.signed_by(&key, &issuer).unwrap_or_else(|e| fail("server certificate", e));
        let folder = tempfile::tempdir().unwrap_or_else(|err| panic!("test CA folder: {err}"));
        for (name, pem) in [
            ("ca.pem", ca_cert.pem()),
            ("server.pem", cert.pem()),
            ("server-key.pem", key.serialize_pem()),
        ] {
            std::fs::write(folder.path().join(name), pem)
                .unwrap_or_else(|err| panic!("test CA {name}: {err}"));
        }
        TestCa { folder }
    }

    /// The authority's certificate (PEM).
    pub fn ca_file(&self) -> PathBuf {
        self.folder.path().join("ca.pem")
    }

    /// The server's certificate (PEM), for 127.0.0.1.
    pub fn server_cert(&self) -> PathBuf {
        self.folder.path().join("server.pem")
    }

    /// A client transport of the render pod's that trusts this authority beside the system's
    /// roots (what `--objects-ca-file` gives a pod).
    pub fn connector(&self) -> StoreConnector {
        let pem = std::fs::read(self.ca_file()).unwrap_or_else(|err| panic!("test CA: {err}"));
        let (connector, _) =
            StoreConnector::with_ca(&pem).unwrap_or_else(|err| panic!("test CA: {err}"));
        connector
    }

    /// The server's private key (PEM).
    pub fn server_key(&self) -> PathBuf {
        self.folder.path().join("server-key.pem")
    }
}

impl Default for TestCa {
    fn default() -> Self {
        Self::new()
    }
}
