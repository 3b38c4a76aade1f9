//! Certificates and tokens for the local control plane, made with the `openssl` command.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::ClusterError;

/// Files the control plane components read.
pub(super) struct Pki {
    pub ca_cert: PathBuf,
    pub ca_key: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub service_account_key: PathBuf,
    pub service_account_pub: PathBuf,
    pub token_file: PathBuf,
}

/// A static bearer token and who it stands for.
pub(super) struct Identity {
    pub user: &'static str,
    pub groups: &'static str,
    pub token: String,
}

/// Admin, controller-manager and scheduler identities, each with a fresh random token.
pub(super) fn identities() -> [Identity; 3] {
    let token = |user: &str| format!("{user}-{:016x}", random_u64());
    [
        Identity { user: "admin", groups: "system:masters", token: token("admin") },
        Identity {
            user: "system:kube-controller-manager",
            groups: "",
            token: token("controller-manager"),
        },
        Identity { user: "system:kube-scheduler", groups: "", token: token("scheduler") },
    ]
}

fn random_u64() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

/// Writes a CA, a serving certificate for 127.0.0.1 and the in-cluster names, a service-account
/// key pair and the static token file into `dir`.
pub(super) fn create(dir: &Path, identities: &[Identity]) -> Result<Pki, ClusterError> {
    let pki = Pki {
        ca_cert: dir.join("ca.crt"),
        ca_key: dir.join("ca.key"),
        serving_cert: dir.join("apiserver.crt"),
        serving_key: dir.join("apiserver.key"),
        service_account_key: dir.join("sa.key"),
        service_account_pub: dir.join("sa.pub"),
        token_file: dir.join("tokens.csv"),
    };
    let p = |path: &PathBuf| path.to_string_lossy().into_owned();
    openssl(&["genrsa", "-out", &p(&pki.ca_key), "2048"])?;
    openssl(&[
        "req",
        "-x509",
        "-new",
        "-key",
        &p(&pki.ca_key),
        "-days",
        "2",
        "-subj",
        "/CN=renderpool-test-ca",
        "-out",
        &p(&pki.ca_cert),
    ])?;
    openssl(&["genrsa", "-out", &p(&pki.serving_key), "2048"])?;
    let csr = dir.join("apiserver.csr");
    openssl(&[
        "req",
        "-new",
        "-key",
        &p(&pki.serving_key),
        "-subj",
        "/CN=kube-apiserver",
        "-out",
        &p(&csr),
    ])?;
    let ext = dir.join("apiserver.ext");
    std::fs::write(
        &ext,
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,\
         DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n\
         extendedKeyUsage=serverAuth\n",
    )?;
    openssl(&[
        "x509",
        "-req",
        "-in",
        &p(&csr),
        "-CA",
        &p(&pki.ca_cert),
        "-CAkey",
        &p(&pki.ca_key),
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        &p(&ext),
        "-out",
        &p(&pki.serving_cert),
    ])?;
    openssl(&["genrsa", "-out", &p(&pki.service_account_key), "2048"])?;
    openssl(&[
        "rsa",
        "-in",
        &p(&pki.service_account_key),
        "-pubout",
        "-out",
        &p(&pki.service_account_pub),
    ])?;
    let tokens: String = identities
        .iter()
        .map(|id| format!("{},{},{},\"{}\"\n", id.token, id.user, id.user, id.groups))
        .collect();
    std::fs::write(&pki.token_file, tokens)?;
    Ok(pki)
}

fn openssl(args: &[&str]) -> Result<(), ClusterError> {
    let output = Command::new("openssl").args(args).output()?;
    if output.status.success() {
        Ok(())
    } else {
        Err(ClusterError::Setup(format!(
            "openssl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        )))
    }
}
