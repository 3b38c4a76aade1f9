//! A job's end POSTed to its webhook, signed the Standard Webhooks way: headers `webhook-id`
//! (the same on every attempt and every redelivery of the job: a receiver drops repeats by it),
//! `webhook-timestamp` (Unix seconds) and `webhook-signature` (`v1,` and the base64 of
//! HMAC-SHA256 over `id.timestamp.body`, keyed with the pool's secret). Retried with backoff
//! on 5xx, 429, timeouts and connection failures; never sent to a private, loopback or
//! link-local address unless the pool allows them (the address is resolved once, checked, and
//! the request sent to that address, so a DNS answer cannot change between check and use).

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use hmac::{Hmac, Mac};
use http_body_util::{BodyExt, Full};
use renderpool_api::jobs::{JobId, WebhookStatus, webhook_host};
use sha2::Sha256;

use crate::outbound;

/// The prefix of a Standard Webhooks secret (the rest is the key, base64).
pub const SECRET_PREFIX: &str = "whsec_";

/// How webhooks are sent.
#[derive(Clone)]
pub struct WebhookConfig {
    /// The signing key; without one, webhooks are sent unsigned.
    pub key: Option<Vec<u8>>,
    /// Private, loopback and link-local addresses are allowed (a pool whose receivers are in
    /// the cluster, or a test).
    pub allow_private: bool,
    /// Time for one attempt.
    pub timeout: Duration,
    /// Attempts in all.
    pub attempts: u32,
    /// The pause before the second attempt (doubling after).
    pub first_backoff: Duration,
}

impl std::fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookConfig")
            .field("signed", &self.key.is_some())
            .field("allow_private", &self.allow_private)
            .field("timeout", &self.timeout)
            .field("attempts", &self.attempts)
            .finish()
    }
}

/// Why the secret file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// Unreadable.
    #[error("cannot read the webhook secret {path}: {source}")]
    Read { path: std::path::PathBuf, source: std::io::Error },
    /// `whsec_` followed by something that is not base64, or nothing at all.
    #[error("the webhook secret {0} is empty, or `whsec_` followed by no valid base64")]
    Invalid(std::path::PathBuf),
}

/// The signing key in `path`: `whsec_<base64>` as Standard Webhooks libraries write them, or
/// any other text taken as the key's bytes.
pub fn read_key(path: &Path) -> Result<Vec<u8>, SecretError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| SecretError::Read { path: path.to_path_buf(), source })?;
    let text = text.trim();
    let key = match text.strip_prefix(SECRET_PREFIX) {
        Some(encoded) => STANDARD.decode(encoded).ok(),
        None => Some(text.as_bytes().to_vec()),
    };
    key.filter(|k| !k.is_empty()).ok_or_else(|| SecretError::Invalid(path.to_path_buf()))
}

/// `v1,<base64 of HMAC-SHA256(key, "id.timestamp.body")>`.
pub fn signature(key: &[u8], id: &str, timestamp: u64, body: &[u8]) -> String {
    // HMAC takes a key of any length.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts keys of every length"));
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// The `webhook-id` of job `id`'s end: one per job, whatever the attempt or delivery.
pub fn message_id(id: &JobId) -> String {
    format!("msg_{id}")
}

/// Whether `ip` is an address a public webhook must not point at: loopback, private,
/// link-local, shared (CGNAT), unspecified, multicast, broadcast, documentation, or the IPv6
/// forms of these (unique local, link-local, v4-mapped).
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 198 && (b == 18 || b == 19))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_private(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
        }
    }
}

/// Why one attempt failed, and whether another may succeed.
#[derive(Debug)]
struct AttemptError {
    detail: String,
    retry: bool,
}

/// The address to send to: the URL's host resolved once, refused when private and not allowed.
async fn address(url: &str, allow_private: bool) -> Result<(String, SocketAddr), AttemptError> {
    let fail = |detail: String, retry: bool| AttemptError { detail, retry };
    let host =
        webhook_host(url).ok_or_else(|| fail(format!("{url:?} is not a webhook URL"), false))?;
    let https = url.starts_with("https://");
    let port = url
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split(['/', '?', '#']).next())
        .and_then(|authority| {
            authority.rsplit_once(']').map_or(authority, |(_, p)| p).rsplit_once(':')
        })
        .and_then(|(_, port)| port.parse::<u16>().ok())
        .unwrap_or(if https { 443 } else { 80 });
    let resolved: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| fail(format!("cannot resolve {host}: {e}"), true))?
            .collect(),
    };
    let chosen = resolved
        .iter()
        .find(|addr| allow_private || !is_private(addr.ip()))
        .copied()
        .ok_or_else(|| {
            fail(
                format!(
                    "{host} resolves only to private, loopback or link-local addresses ({resolved:?}), which this pool does not send webhooks to (--jobs-webhook-allow-private)"
                ),
                false,
            )
        })?;
    Ok((host.to_string(), chosen))
}

async fn attempt(
    config: &WebhookConfig,
    url: &str,
    id: &str,
    body: &Bytes,
) -> Result<(), AttemptError> {
    let (_, addr) = address(url, config.allow_private).await?;
    let timestamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut request = hyper::Request::post(url)
        .header("content-type", "application/json")
        .header("user-agent", "renderpool-webhooks")
        .header("webhook-id", id)
        .header("webhook-timestamp", timestamp.to_string());
    if let Some(key) = &config.key {
        request = request.header("webhook-signature", signature(key, id, timestamp, body));
    }
    let request = request
        .body(Full::new(body.clone()))
        .map_err(|e| AttemptError { detail: format!("{url}: {e}"), retry: false })?;
    let client = outbound::pinned_client::<Full<Bytes>>(addr);
    let exchange = async {
        let response = client.request(request).await?;
        let status = response.status();
        // Read (and drop) what it answers, so the attempt ends when the answer does.
        let _ = response.into_body().collect().await;
        Ok::<_, hyper_util::client::legacy::Error>(status)
    };
    match tokio::time::timeout(config.timeout, exchange).await {
        Ok(Ok(status)) if status.is_success() => Ok(()),
        Ok(Ok(status)) => Err(AttemptError {
            detail: format!("{url} answered {status}"),
            retry: status.is_server_error() || status.as_u16() == 429 || status.as_u16() == 408,
        }),
        Ok(Err(e)) => Err(AttemptError { detail: format!("{url}: {e}"), retry: true }),
        Err(_) => Err(AttemptError {
            detail: format!(
                "{url}: no answer within {} ms (timed out)",
                config.timeout.as_millis()
            ),
            retry: true,
        }),
    }
}

/// Sends job `id`'s end (`body`) to `url`, retrying what may pass later; `until_stop` ends the
/// retries early (a draining pod hands the job back, and the next pod sends it again with the
/// same `webhook-id`). Returns how it went.
pub async fn deliver(
    config: &WebhookConfig,
    url: &str,
    id: &JobId,
    body: Bytes,
    previous: Option<&WebhookStatus>,
    mut until_stop: impl FnMut() -> bool,
) -> WebhookStatus {
    let message = message_id(id);
    let mut status = previous.cloned().unwrap_or_default();
    let mut backoff = config.first_backoff;
    for attempt_number in 1..=config.attempts.max(1) {
        status.attempts += 1;
        match attempt(config, url, &message, &body).await {
            Ok(()) => {
                status.delivered = true;
                status.error = None;
                return status;
            }
            Err(e) => {
                tracing::warn!(job = %id, attempt = attempt_number, error = %e.detail, "webhook failed");
                status.error = Some(e.detail);
                if !e.retry || attempt_number == config.attempts || until_stop() {
                    return status;
                }
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(60));
    }
    status
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The Standard Webhooks specification's own example: secret, id, timestamp, payload and
    /// the signature its reference libraries compute.
    #[test]
    fn signatures_match_the_specifications_example() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n").unwrap();
        let key = read_key(&path).unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            signature(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        std::fs::write(&path, "whsec_!!!").unwrap();
        assert!(read_key(&path).is_err());
        std::fs::write(&path, "plain-key").unwrap();
        assert_eq!(read_key(&path).unwrap(), b"plain-key");
    }

    #[test]
    fn private_addresses_are_known() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
            "224.0.0.1",
        ] {
            assert!(is_private(private.parse().unwrap()), "{private}");
        }
        for public in ["8.8.8.8", "1.1.1.1", "2606:4700::1111", "100.128.0.1"] {
            assert!(!is_private(public.parse().unwrap()), "{public}");
        }
    }

    #[tokio::test]
    async fn private_targets_are_refused_unless_allowed() {
        let refused = address("http://127.0.0.1:9/hook", false).await.unwrap_err();
        assert!(!refused.retry && refused.detail.contains("private"), "{}", refused.detail);
        let (host, addr) = address("http://127.0.0.1:9/hook", true).await.unwrap();
        assert_eq!((host.as_str(), addr.port()), ("127.0.0.1", 9));
        let (_, addr) = address("https://[::1]/x", true).await.unwrap();
        assert_eq!(addr.port(), 443);
    }
}
