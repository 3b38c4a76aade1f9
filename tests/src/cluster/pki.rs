//! Certificates and tokens for the local control plane, made with the `openssl` command.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::ClusterError;
use super::addresses::{KUBERNETES_SERVICE_IP, NODE_NAME};

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
    /// The aggregation layer's CA: API servers behind it trust requests signed by it.
    pub front_proxy_ca: Ca,
    /// The API server's client certificate towards aggregated API servers
    /// ([`FRONT_PROXY_CLIENT`]).
    pub front_proxy_client_cert: PathBuf,
    pub front_proxy_client_key: PathBuf,
}

/// The common name of the API server's front-proxy client certificate, the one name aggregated
/// API servers accept the `X-Remote-*` headers from.
pub(super) const FRONT_PROXY_CLIENT: &str = "front-proxy-client";

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
    /// Prometheus's Kubernetes service discovery: reads pods, when the metrics pipeline starts.
    pub prometheus: Identity,
    /// prometheus-adapter: delegated authentication and authorization, reads pods.
    pub prometheus_adapter: Identity,
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
            prometheus: id("renderpool-tests:prometheus", ""),
            prometheus_adapter: id("renderpool-tests:prometheus-adapter", ""),
        }
    }

    fn all(&self) -> [&Identity; 8] {
        [
            &self.admin,
            &self.controller_manager,
            &self.scheduler,
            &self.node,
            &self.kube_proxy,
            &self.coredns,
            &self.prometheus,
            &self.prometheus_adapter,
        ]
    }
}

fn random_u64() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

/// Writes a CA, a serving certificate for 127.0.0.1 and the in-cluster names, the API server's
/// kubelet client certificate, the front-proxy CA with the API server's client certificate, a
/// service-account key pair and the static token file into `dir`.
pub(super) fn create(dir: &Path, identities: &Identities) -> Result<Pki, ClusterError> {
    let ca = Ca::create(dir, "ca", "/CN=renderpool-test-ca")?;
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
    // A CA of its own, as kubeadm makes: a certificate from the cluster CA must not be able to
    // pose as the front proxy and assert any user in the X-Remote-User header.
    let front_proxy_ca = Ca::create(dir, "front-proxy-ca", "/CN=renderpool-test-front-proxy-ca")?;
    let (front_proxy_client_cert, front_proxy_client_key) = front_proxy_ca.issue(
        dir,
        "front-proxy-client",
        &format!("/CN={FRONT_PROXY_CLIENT}"),
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
        front_proxy_ca,
        front_proxy_client_cert,
        front_proxy_client_key,
    })
}

/// The cluster's CA: its certificate and key.
pub(super) struct Ca {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Ca {
    /// Makes a self-signed CA `<dir>/<name>.crt` and `.key` for `subject`.
    fn create(dir: &Path, name: &str, subject: &str) -> Result<Ca, ClusterError> {
        let cert = dir.join(format!("{name}.crt"));
        let key = dir.join(format!("{name}.key"));
        openssl(&["genrsa", "-out", &p(&key), "2048"])?;
        openssl(&[
            "req",
            "-x509",
            "-new",
            "-key",
            &p(&key),
            "-days",
            "2",
            "-subj",
            subject,
            "-out",
            &p(&cert),
        ])?;
        Ok(Ca { cert, key })
    }

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
