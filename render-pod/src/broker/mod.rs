//! The durable jobs' broker, NATS JetStream: the work-queue stream jobs are published to (made
//! or checked at start, with its limits), the dead-letter stream, the pool's durable pull
//! consumer, the key-value bucket that holds each job's state, and the subjects a job's end is
//! announced on. The pod holds no durable state of its own: all of it is here or in the object
//! store.

pub mod backlog;
mod setup;
pub mod states;

use std::path::PathBuf;
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, consumer::PullConsumer};
use bytes::Bytes;
use renderpool_api::jobs::{JobId, Subjects};

pub use backlog::{Backlog, StreamBacklog};
pub use states::{JobStates, StateError};

/// The header that makes the stream drop a duplicate publish (JetStream's deduplication).
pub const MSG_ID_HEADER: &str = "Nats-Msg-Id";
/// The header a dead letter carries its reason in (also in its JSON body).
pub const DEAD_REASON_HEADER: &str = "Renderpool-Dead-Reason";

/// How to reach the broker and what to make there.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// `nats://host:4222`.
    pub url: String,
    /// A NATS credentials file (JWT and seed), if the server wants one.
    pub creds_file: Option<PathBuf>,
    /// A file holding a token, if the server wants one.
    pub token_file: Option<PathBuf>,
    /// The jobs' work-queue stream.
    pub stream: String,
    /// The dead-letter stream.
    pub dead_letter_stream: String,
    /// The subjects.
    pub subjects: Subjects,
    /// The durable pull consumer's name.
    pub consumer: String,
    /// The job state bucket.
    pub state_bucket: String,
    /// Most jobs the stream holds; a publish past it is refused (-1: no limit).
    pub max_messages: i64,
    /// Oldest a queued job may get before the stream drops it (zero: no limit).
    pub max_age: Duration,
    /// Stream replicas (NATS cluster).
    pub replicas: usize,
    /// How long a job's state is kept after its last change.
    pub state_ttl: Duration,
    /// How long a delivered job may go without an ack or a progress ack before the broker
    /// delivers it again.
    pub ack_wait: Duration,
    /// Deliveries after which a job that never finished goes to the dead-letter stream.
    pub max_deliveries: u32,
}

/// Why the broker could not be used.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// Credentials could not be read.
    #[error("cannot read {path}: {source}")]
    Credentials { path: PathBuf, source: std::io::Error },
    /// No connection.
    #[error("cannot connect to NATS at {url}: {detail}")]
    Connect { url: String, detail: String },
    /// A stream exists in a shape jobs cannot use.
    #[error("stream {stream}: {detail}")]
    Stream { stream: String, detail: String },
    /// A JetStream request failed.
    #[error("{doing}: {detail}")]
    Request { doing: &'static str, detail: String },
}

impl BrokerError {
    fn request(doing: &'static str, error: impl std::fmt::Display) -> Self {
        BrokerError::Request { doing, detail: error.to_string() }
    }
}

/// The broker, connected and set up.
#[derive(Clone)]
pub struct Broker {
    client: async_nats::Client,
    jetstream: jetstream::Context,
    /// Each job's state.
    pub states: JobStates,
    /// What was asked for.
    pub config: BrokerConfig,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker").field("config", &self.config).finish_non_exhaustive()
    }
}

impl Broker {
    /// Connects, then makes or checks the streams and the state bucket.
    pub async fn connect(config: BrokerConfig) -> Result<Self, BrokerError> {
        // A lost connection is retried in the background while the pod runs; at start, a
        // broker that cannot be reached is a clear error (the pod restarts and tries again).
        let mut options = async_nats::ConnectOptions::new().name("render-pod");
        if let Some(path) = &config.creds_file {
            options = options
                .credentials_file(path)
                .await
                .map_err(|source| BrokerError::Credentials { path: path.clone(), source })?;
        }
        if let Some(path) = &config.token_file {
            let token = std::fs::read_to_string(path)
                .map_err(|source| BrokerError::Credentials { path: path.clone(), source })?;
            options = options.token(token.trim().to_string());
        }
        let connect = options.connect(&config.url);
        let client = match tokio::time::timeout(Duration::from_secs(30), connect).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => {
                return Err(BrokerError::Connect {
                    url: config.url.clone(),
                    detail: e.to_string(),
                });
            }
            Err(_) => {
                return Err(BrokerError::Connect {
                    url: config.url.clone(),
                    detail: "no connection within 30 s".into(),
                });
            }
        };
        let jetstream = jetstream::new(client.clone());
        setup::streams(&jetstream, &config).await?;
        let states = JobStates::open(&jetstream, &config).await?;
        Ok(Self { client, jetstream, states, config })
    }

    /// Jobs in the work-queue stream: queued, or taken by a pod and not yet ended (the stream
    /// drops each job once it ends), and how long the oldest has been there. Read from the
    /// stream, so a pod that only accepts jobs and a pool whose consumer does not exist yet see
    /// it too.
    pub async fn backlog(&self) -> Result<StreamBacklog, BrokerError> {
        let stream = self
            .jetstream
            .get_stream(&self.config.stream)
            .await
            .map_err(|e| BrokerError::request("reading the job stream", e))?;
        let state = &stream.cached_info().state;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        Ok(StreamBacklog::at(state.messages, state.first_timestamp.unix_timestamp(), now))
    }

    /// The pool's durable pull consumer (made, or brought to this pod's settings).
    pub async fn consumer(&self) -> Result<PullConsumer, BrokerError> {
        setup::consumer(&self.jetstream, &self.config).await
    }

    /// Publishes a job message with idempotency key `key` and waits for the stream to store it;
    /// a duplicate publish of the same key within the stream's window is stored once.
    pub async fn publish(&self, key: &str, message: Bytes) -> Result<u64, BrokerError> {
        let mut headers = HeaderMap::new();
        headers.insert(MSG_ID_HEADER, key);
        let ack = self
            .jetstream
            .publish_with_headers(self.config.subjects.submit.clone(), headers, message)
            .await
            .map_err(|e| BrokerError::request("publishing the job", e))?;
        let ack = ack.await.map_err(|e| BrokerError::request("storing the job", e))?;
        Ok(ack.sequence)
    }

    /// Moves a job to the dead-letter stream: `body` carries the message and the reason.
    pub async fn dead_letter(
        &self,
        id: &JobId,
        reason: &str,
        body: Bytes,
    ) -> Result<(), BrokerError> {
        let mut headers = HeaderMap::new();
        headers.insert(MSG_ID_HEADER, format!("dead-{id}").as_str());
        headers.insert(DEAD_REASON_HEADER, reason.replace(['\r', '\n'], " ").as_str());
        let ack = self
            .jetstream
            .publish_with_headers(self.config.subjects.dead.clone(), headers, body)
            .await
            .map_err(|e| BrokerError::request("publishing the dead letter", e))?;
        ack.await.map_err(|e| BrokerError::request("storing the dead letter", e))?;
        Ok(())
    }

    /// Announces a job's end on `<prefix>.events.<id>` (core NATS: subscribers that are there
    /// get it; a stream on that subject keeps it for those that are not).
    pub async fn announce(&self, id: &JobId, event: Bytes) -> Result<(), BrokerError> {
        // Sent with the connection's next flush, not waited for: an event is at most once.
        self.client
            .publish(self.config.subjects.event(id), event)
            .await
            .map_err(|e| BrokerError::request("announcing the job's end", e))
    }

    /// Sends what the connection still holds (acks, hand-backs, events), before the process
    /// exits: an unsent hand-back would leave its job waiting out the ack wait.
    pub async fn flush(&self) -> Result<(), BrokerError> {
        self.client.flush().await.map_err(|e| BrokerError::request("flushing the connection", e))
    }
}
