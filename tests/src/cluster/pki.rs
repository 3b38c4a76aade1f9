//! Certificates and tokens for the local control plane, made with the `openssl` command.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::ClusterError;
use super::addresses::KUBERNETES_SERVICE_IP;
use super::real_node::NODE_NAME;

/// Files the control plane components read.
pub(super) struct Pki {
    pub ca: Ca,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    /// The API server's client certificate towards kubelets (group `system:masters`).
    pub kubelet_client_cert: PathBuf,
    pub kubelet_client_key: PathBuf,
    pub service_account_key: PathBuf,
    pub service_account_pub: PathBuf,
    pub token_file: PathBuf,
}

/// A static bearer token and who it stands for.
pub(super) struct Identity {
    pub user: String,
    pub groups: &'static str,
    pub token: String,
}

/// Every identity in the static token file, each with a fresh random token.
pub(super) struct Identities {
    pub admin: Identity,
    pub controller_manager: Identity,
    pub scheduler: Identity,
    /// The real node's kubelet; the Node authorizer keys on this name.
    pub node: Identity,
    /// Bound to `system:node-proxier` by the default RBAC.
    pub kube_proxy: Identity,
    /// Given read access to Services and EndpointSlices when the real node starts.
    pub coredns: Identity,
}

impl Identities {
    /// Fresh tokens for every identity.
    pub fn new() -> Identities {
        let id = |user: &str, groups| Identity {
            user: user.to_string(),
            groups,
            token: format!("{}-{:016x}", user.replace(':', "-"), random_u64()),
        };
        Identities {
            admin: id("admin", "system:masters"),
            controller_manager: id("system:kube-controller-manager", ""),
            scheduler: id("system:kube-scheduler", ""),
            node: id(&format!("system:node:{NODE_NAME}"), "system:nodes"),
            kube_proxy: id("system:kube-proxy", ""),
            coredns: id("system:coredns", ""),
        }
    }

    fn all(&self) -> [&Identity; 6] {
        [
            &self.admin,
            &self.controller_manager,
            &self.scheduler,
            &self.node,
            &self.kube_proxy,
            &self.coredns,
        ]
    }
}

fn random_u64() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

/// Writes a CA, a serving certificate for 127.0.0.1 and the in-cluster names, the API server's
/// kubelet client certificate, a service-account key pair and the static token file into `dir`.
pub(super) fn create(dir: &Path, identities: &Identities) -> Result<Pki, ClusterError> {
    let ca_cert = dir.join("ca.crt");
    let ca_key = dir.join("ca.key");
    openssl(&["genrsa", "-out", &p(&ca_key), "2048"])?;
    openssl(&[
        "req",
        "-x509",
        "-new",
        "-key",
        &p(&ca_key),
        "-days",
        "2",
        "-subj",
        "/CN=renderpool-test-ca",
        "-out",
        &p(&ca_cert),
    ])?;
    let ca = Ca { cert: ca_cert, key: ca_key };
    // Pods on the real node see the API server at the `kubernetes` Service's address.
    let (serving_cert, serving_key) = ca.issue(
        dir,
        "apiserver",
        "/CN=kube-apiserver",
        &format!(
            "subjectAltName=IP:127.0.0.1,IP:{KUBERNETES_SERVICE_IP},DNS:localhost,DNS:kubernetes,\
             DNS:kubernetes.default,DNS:kubernetes.default.svc,\
             DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\n"
        ),
    )?;
    let (kubelet_client_cert, kubelet_client_key) = ca.issue(
        dir,
        "apiserver-kubelet-client",
        "/O=system:masters/CN=kube-apiserver-kubelet-client",
        "extendedKeyUsage=clientAuth\n",
    )?;
    let service_account_key = dir.join("sa.key");
    let service_account_pub = dir.join("sa.pub");
    openssl(&["genrsa", "-out", &p(&service_account_key), "2048"])?;
    openssl(&[
        "rsa",
        "-in",
        &p(&service_account_key),
        "-pubout",
        "-out",
        &p(&service_account_pub),
    ])?;
    let token_file = dir.join("tokens.csv");
    let tokens: String = identities
        .all()
        .iter()
        .map(|id| format!("{},{},{},\"{}\"\n", id.token, id.user, id.user, id.groups))
        .collect();
    std::fs::write(&token_file, tokens)?;
    Ok(Pki {
        ca,
        serving_cert,
        serving_key,
        kubelet_client_cert,
        kubelet_client_key,
        service_account_key,
        service_account_pub,
        token_file,
    })
}

/// The cluster's CA: its certificate and key.
pub(super) struct Ca {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Ca {
    /// Issues `<dir>/<name>.crt` and `.key` (RSA: every TLS client speaks it, busybox's too) for
    /// `subject` with the given x509v3 `extensions` (`openssl x509 -extfile` lines); returns
    /// (certificate, key).
    pub fn issue(
        &self,
        dir: &Path,
        name: &str,
        subject: &str,
        extensions: &str,
    ) -> Result<(PathBuf, PathBuf), ClusterError> {
        let cert = dir.join(format!("{name}.crt"));
        let key = dir.join(format!("{name}.key"));
        let csr = dir.join(format!("{name}.csr"));
        let ext = dir.join(format!("{name}.ext"));
        openssl(&["genrsa", "-out", &p(&key), "2048"])?;
        openssl(&["req", "-new", "-key", &p(&key), "-subj", subject, "-out", &p(&csr)])?;
        std::fs::write(&ext, extensions)?;
        openssl(&[
            "x509",
            "-req",
            "-in",
            &p(&csr),
            "-CA",
            &p(&self.cert),
            "-CAkey",
            &p(&self.key),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &p(&ext),
            "-out",
            &p(&cert),
        ])?;
        Ok((cert, key))
    }
}

fn p(path: &Path) -> String {
    path.to_string_lossy().into_owned()
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
