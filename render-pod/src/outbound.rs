//! Outbound HTTP(S) of the durable jobs: the object store's requests and the webhooks, over
//! hyper with rustls on ring (the one crypto provider the workspace builds) and the system's
//! root certificates. `http://` goes out as plain HTTP. A webhook's connection goes to the one
//! address its host was resolved to and checked against (see `jobs::webhook`), never to a
//! second DNS answer.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use http_body_util::BodyExt;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector as TcpConnector;
use hyper_util::client::legacy::connect::dns::{GaiResolver, Name};
use hyper_util::rt::TokioExecutor;
use object_store::client::{
    ClientOptions, HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse,
    HttpResponseBody, HttpService,
};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::error_chain::chain;

/// Time to connect (TCP and TLS) before a request fails as a connection error.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// rustls on ring with the system's roots (`SSL_CERT_FILE` or `SSL_CERT_DIR` when set, else
/// the distribution's bundle: the image has Debian's at `/etc/ssl/certs/ca-certificates.crt`),
/// and those roots; without any, an empty set: plain HTTP still works, and HTTPS fails naming
/// the unknown issuer.
fn system() -> &'static (rustls::ClientConfig, rustls::RootCertStore) {
    static CONFIG: OnceLock<(rustls::ClientConfig, rustls::RootCertStore)> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let mut roots = rustls::RootCertStore::empty();
        let found = rustls_native_certs::load_native_certs();
        let (added, _) = roots.add_parsable_certificates(found.certs);
        if added == 0 {
            tracing::warn!(
                "no system root certificates: https:// endpoints and webhooks will fail"
            );
        }
        (client_config(roots.clone()), roots)
    })
}

fn client_config(roots: rustls::RootCertStore) -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map(|builder| builder.with_root_certificates(roots).with_no_client_auth())
        .unwrap_or_else(|_| unreachable!("ring supports the default protocol versions"))
}

fn tls() -> rustls::ClientConfig {
    system().0.clone()
}

/// The root certificates outbound HTTPS trusts (read once, at the first call: the pod makes it
/// at start, so that a pod without any says so before its first job).
pub fn trusted_roots() -> usize {
    system().1.len()
}

/// An HTTPS-or-HTTP connector over `tcp`, trusting `tls`'s roots.
fn https<R>(tcp: TcpConnector<R>, tls: rustls::ClientConfig) -> HttpsConnector<TcpConnector<R>> {
    let mut tcp = tcp;
    tcp.enforce_http(false);
    tcp.set_connect_timeout(Some(CONNECT_TIMEOUT));
    HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(tcp)
}

/// A client whose every connection goes to `addr`, whatever the URL's host (which still names
/// the server for TLS and the `Host` header).
pub fn pinned_client<B>(addr: SocketAddr) -> Client<HttpsConnector<TcpConnector<Pinned>>, B>
where
    B: hyper::body::Body + Send + 'static + Unpin,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    Client::builder(TokioExecutor::new())
        .build(https(TcpConnector::new_with_resolver(Pinned(addr)), tls()))
}

/// A resolver that answers one address for every name.
#[derive(Debug, Clone, Copy)]
pub struct Pinned(SocketAddr);

impl tower_service::Service<Name> for Pinned {
    type Response = std::iter::Once<SocketAddr>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Name) -> Self::Future {
        let addr = self.0;
        Box::pin(async move { Ok(std::iter::once(addr)) })
    }
}

/// object_store's HTTP through this module's client, trusting the system's roots and, for a
/// store of a private CA, that CA's certificates too.
#[derive(Debug, Clone)]
pub struct StoreConnector {
    tls: Arc<rustls::ClientConfig>,
}

impl Default for StoreConnector {
    fn default() -> Self {
        Self { tls: Arc::new(tls()) }
    }
}

/// Why a CA file cannot be trusted.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// Not PEM certificates.
    #[error("not PEM certificates: {0}")]
    Pem(String),
    /// No certificate in it.
    #[error("it holds no certificate")]
    Empty,
    /// A certificate rustls cannot use as a root.
    #[error("a certificate cannot be a root: {0}")]
    Refused(String),
}

impl StoreConnector {
    /// Trusting the certificates of `pem` (one or more, PEM) beside the system's roots; how
    /// many it added.
    pub fn with_ca(pem: &[u8]) -> Result<(Self, usize), CaError> {
        let certificates = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| CaError::Pem(e.to_string()))?;
        if certificates.is_empty() {
            return Err(CaError::Empty);
        }
        let mut roots = system().1.clone();
        let added = certificates.len();
        for certificate in certificates {
            roots.add(certificate).map_err(|e| CaError::Refused(e.to_string()))?;
        }
        Ok((Self { tls: Arc::new(client_config(roots)) }, added))
    }
}

impl HttpConnector for StoreConnector {
    fn connect(&self, _options: &ClientOptions) -> object_store::Result<HttpClient> {
        let tcp = TcpConnector::new_with_resolver(GaiResolver::new());
        let client = Client::builder(TokioExecutor::new()).build(https(tcp, (*self.tls).clone()));
        Ok(HttpClient::new(StoreService { client }))
    }
}

/// A request that got no answer, its message carrying the causes (a certificate refused, a
/// connection refused) that object_store's own text would leave at "client error (Connect)".
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
struct Transport {
    message: String,
    #[source]
    source: hyper_util::client::legacy::Error,
}

#[derive(Debug)]
struct StoreService {
    client:
        Client<HttpsConnector<TcpConnector<GaiResolver>>, object_store::client::HttpRequestBody>,
}

#[async_trait]
impl HttpService for StoreService {
    async fn call(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        let response = self.client.request(request).await.map_err(|e| {
            let kind = if e.is_connect() { HttpErrorKind::Connect } else { HttpErrorKind::Request };
            HttpError::new(kind, Transport { message: chain(&e), source: e })
        })?;
        let (parts, body) = response.into_parts();
        let body = body.map_err(|e| HttpError::new(HttpErrorKind::Decode, e));
        Ok(HttpResponse::from_parts(parts, HttpResponseBody::new(body)))
    }
}
