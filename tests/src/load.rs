//! A steady load of HTTP requests while a test disrupts the servers behind one URL (a Service
//! during a drain, say) or lets them scale, with the count of what happened to each request.
//!
//! Every request goes on a new connection, so a Service spreads them over its endpoints as it
//! would for separate clients, and no request is sent on a connection the server has already
//! closed. A request whose connection could not be made (refused, reset while connecting) never
//! reached a server: it is retried after a pause and counted as a retry. Any other request was
//! admitted: it completed if it was answered 200 with its whole body, was refused if the server
//! turned it away cleanly (429 or 503 with an error code and `Retry-After`, after which the
//! client waits as told), and failed otherwise.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use reqwest::StatusCode;
use tokio::task::JoinHandle;

/// Pause before a retry, so a refused client does not spin.
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// Pause between two requests of a client: a steady load, not a flood that starves the pods'
/// probes of CPU.
const PACE: Duration = Duration::from_millis(20);
/// Longest a request may take; a drain never holds one this long.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(90);
/// Longest a refused client waits before its next request, whatever `Retry-After` says.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(5);

/// What happened to the requests of a [`Load`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    /// Requests a server took (its connection was made).
    pub admitted: u64,
    /// Admitted requests answered 200 with their whole body.
    pub completed: u64,
    /// Admitted requests turned away cleanly (429 or 503 with `Retry-After`), by error code.
    pub refused: BTreeMap<String, u64>,
    /// Admitted requests that neither completed nor were refused: each one's status or error.
    pub failed: Vec<String>,
    /// Connections that could not be made, each followed by a retry.
    pub retried: u64,
}

impl Tally {
    /// All clean refusals, whatever their code.
    pub fn refusals(&self) -> u64 {
        self.refused.values().sum()
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "admitted {}, completed {}, refused {} {:?}, failed {}, retried {}",
            self.admitted,
            self.completed,
            self.refusals(),
            self.refused,
            self.failed.len(),
            self.retried
        )
    }
}

/// Clients sending one request after another until [`Load::stop`]; dropping it stops them too.
pub struct Load {
    url: String,
    body: Arc<[u8]>,
    stop: Arc<AtomicBool>,
    tally: Arc<Mutex<Tally>>,
    clients: Vec<JoinHandle<()>>,
}

impl Load {
    /// Starts `clients` loops, each POSTing `body` to `url` one request at a time.
    pub fn start(url: &str, body: Vec<u8>, clients: usize) -> Load {
        let mut load = Load {
            url: url.to_string(),
            body: body.into(),
            stop: Arc::new(AtomicBool::new(false)),
            tally: Arc::default(),
            clients: Vec::new(),
        };
        load.add_clients(clients);
        load
    }

    /// Starts `more` clients beside the running ones (a ramp).
    pub fn add_clients(&mut self, more: usize) {
        for _ in 0..more {
            let client =
                client(self.url.clone(), self.body.clone(), self.stop.clone(), self.tally.clone());
            self.clients.push(tokio::spawn(client));
        }
    }

    /// How many clients are sending.
    pub fn clients(&self) -> usize {
        self.clients.len()
    }

    /// What happened so far, the requests in flight not counted yet.
    pub fn tally(&self) -> Tally {
        self.tally.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Stops the clients once their requests in flight have ended; what happened in all.
    pub async fn stop(mut self) -> Tally {
        self.stop.store(true, Ordering::Relaxed);
        let mut lost = Vec::new();
        for client in std::mem::take(&mut self.clients) {
            if let Err(err) = client.await {
                lost.push(format!("client task: {err}"));
            }
        }
        let mut tally = self.tally();
        tally.failed.extend(lost);
        tally
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for client in &self.clients {
            client.abort();
        }
    }
}

/// What one request came to.
enum Outcome {
    Completed,
    Refused { code: String, retry_after: Duration },
    Failed(String),
}

async fn client(url: String, body: Arc<[u8]>, stop: Arc<AtomicBool>, tally: Arc<Mutex<Tally>>) {
    let record = |change: &dyn Fn(&mut Tally)| {
        change(&mut tally.lock().unwrap_or_else(PoisonError::into_inner));
    };
    let http =
        reqwest::Client::builder().pool_max_idle_per_host(0).timeout(REQUEST_TIMEOUT).build();
    let http = match http {
        Ok(http) => http,
        Err(err) => return record(&|t| t.failed.push(format!("HTTP client: {err}"))),
    };
    while !stop.load(Ordering::Relaxed) {
        let outcome = match http.post(&url).body(body.to_vec()).send().await {
            Err(err) if err.is_connect() => {
                record(&|t| t.retried += 1);
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            }
            Err(err) => Outcome::Failed(format!("{err:?}")),
            Ok(response) => outcome(response).await,
        };
        let pause = match outcome {
            Outcome::Completed => {
                record(&|t| (t.admitted, t.completed) = (t.admitted + 1, t.completed + 1));
                PACE
            }
            Outcome::Refused { code, retry_after } => {
                record(&|t| {
                    t.admitted += 1;
                    *t.refused.entry(code.clone()).or_default() += 1;
                });
                retry_after.min(MAX_RETRY_AFTER)
            }
            Outcome::Failed(what) => {
                record(&|t| {
                    t.admitted += 1;
                    t.failed.push(what.clone());
                });
                PACE
            }
        };
        tokio::time::sleep(pause).await;
    }
}

async fn outcome(response: reqwest::Response) -> Outcome {
    let status = response.status();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    let body = match response.bytes().await {
        Ok(body) => body,
        Err(err) => return Outcome::Failed(format!("{status}, body cut: {err:?}")),
    };
    if status == StatusCode::OK {
        return Outcome::Completed;
    }
    let refusal = matches!(status, StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE);
    let code = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|json| json["error"]["code"].as_str().map(str::to_string));
    match (refusal, code, retry_after) {
        (true, Some(code), Some(seconds)) => {
            Outcome::Refused { code, retry_after: Duration::from_secs(seconds) }
        }
        _ => Outcome::Failed(format!(
            "{status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        )),
    }
}
