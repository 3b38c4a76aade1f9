//! A steady load of HTTP requests while a test disrupts the servers behind one URL (a Service
//! during a drain, say), with the count of what happened to each request.
//!
//! Every request goes on a new connection, so a Service spreads them over its endpoints as it
//! would for separate clients, and no request is sent on a connection the server has already
//! closed. A request whose connection could not be made (refused, reset while connecting) never
//! reached a server: it is retried after a pause and counted as a retry. Any other request was
//! admitted: it completed if it was answered 200 with its whole body, and failed otherwise.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::task::JoinHandle;

/// Pause before a retry, so a refused client does not spin.
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// Pause between two requests of a client: a steady load, not a flood that starves the pods'
/// probes of CPU.
const PACE: Duration = Duration::from_millis(20);
/// Longest a request may take; a drain never holds one this long.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(90);

/// What happened to the requests of a [`Load`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    /// Requests a server took (its connection was made).
    pub admitted: u64,
    /// Admitted requests answered 200 with their whole body.
    pub completed: u64,
    /// Admitted requests that did not complete: each one's status or error.
    pub failed: Vec<String>,
    /// Connections that could not be made, each followed by a retry.
    pub retried: u64,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.admitted += other.admitted;
        self.completed += other.completed;
        self.failed.extend(other.failed);
        self.retried += other.retried;
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "admitted {}, completed {}, failed {}, retried {}",
            self.admitted,
            self.completed,
            self.failed.len(),
            self.retried
        )
    }
}

/// Clients sending one request after another until [`Load::stop`]; dropping it stops them too.
pub struct Load {
    stop: Arc<AtomicBool>,
    clients: Vec<JoinHandle<Tally>>,
}

impl Load {
    /// Starts `clients` loops, each POSTing `body` to `url` one request at a time.
    pub fn start(url: &str, body: Vec<u8>, clients: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let body: Arc<[u8]> = body.into();
        let clients = (0..clients)
            .map(|_| tokio::spawn(client(url.to_string(), body.clone(), stop.clone())))
            .collect();
        Load { stop, clients }
    }

    /// Stops the clients once their requests in flight have ended; the sum of their tallies.
    pub async fn stop(mut self) -> Tally {
        self.stop.store(true, Ordering::Relaxed);
        let mut total = Tally::default();
        for client in std::mem::take(&mut self.clients) {
            match client.await {
                Ok(tally) => total.add(tally),
                Err(err) => total.failed.push(format!("client task: {err}")),
            }
        }
        total
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

async fn client(url: String, body: Arc<[u8]>, stop: Arc<AtomicBool>) -> Tally {
    let mut tally = Tally::default();
    let http =
        reqwest::Client::builder().pool_max_idle_per_host(0).timeout(REQUEST_TIMEOUT).build();
    let http = match http {
        Ok(http) => http,
        Err(err) => {
            tally.failed.push(format!("HTTP client: {err}"));
            return tally;
        }
    };
    while !stop.load(Ordering::Relaxed) {
        match http.post(&url).body(body.to_vec()).send().await {
            Err(err) if err.is_connect() => {
                tally.retried += 1;
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            Err(err) => {
                tally.admitted += 1;
                tally.failed.push(format!("{err:?}"));
            }
            Ok(response) => {
                tally.admitted += 1;
                let status = response.status();
                match response.bytes().await {
                    Ok(_) if status == reqwest::StatusCode::OK => tally.completed += 1,
                    Ok(body) => tally.failed.push(format!(
                        "{status}: {}",
                        String::from_utf8_lossy(&body[..body.len().min(300)])
                    )),
                    Err(err) => tally.failed.push(format!("{status}, body cut: {err:?}")),
                }
                tokio::time::sleep(PACE).await;
            }
        }
    }
    tally
}
