//! Each job's state in a JetStream key-value bucket (key: the job id), changed only by
//! compare-and-set on the entry's revision, so a pod's progress never overwrites a cancellation
//! that came in between, and two messages of one job cannot both claim it.

use std::time::{SystemTime, UNIX_EPOCH};

use async_nats::jetstream::kv::{self, CreateErrorKind, UpdateErrorKind};
use async_nats::jetstream::{self};
use bytes::Bytes;
use renderpool_api::jobs::{JobId, JobStatus};

use super::{BrokerConfig, BrokerError};

/// Attempts at one compare-and-set before giving up (each retry reads the entry again).
const CAS_ATTEMPTS: u32 = 16;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Why a state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The bucket answered with an error, or not at all.
    #[error("job state {id}: {detail}")]
    Store { id: String, detail: String },
    /// The stored value is not a job state (another writer, another version).
    #[error("job state {id} is not readable: {detail}")]
    Corrupt { id: String, detail: String },
    /// Others kept changing it.
    #[error("job state {id} kept changing under this pod")]
    Contended { id: String },
}

/// What a change decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Write the changed state.
    Write,
    /// Leave it as it is.
    Keep,
}

/// The state bucket.
#[derive(Clone)]
pub struct JobStates {
    store: kv::Store,
}

impl JobStates {
    /// Opens the bucket, making it if missing.
    pub(super) async fn open(
        jetstream: &jetstream::Context,
        config: &BrokerConfig,
    ) -> Result<Self, BrokerError> {
        let store = match jetstream.get_key_value(&config.state_bucket).await {
            Ok(store) => store,
            Err(_) => jetstream
                .create_key_value(kv::Config {
                    bucket: config.state_bucket.clone(),
                    description: "renderpool job states".into(),
                    history: 1,
                    max_age: config.state_ttl,
                    num_replicas: config.replicas.max(1),
                    ..Default::default()
                })
                .await
                .map_err(|e| BrokerError::request("making the job state bucket", e))?,
        };
        Ok(Self { store })
    }

    /// The state of `id` and its revision.
    pub async fn get(&self, id: &JobId) -> Result<Option<(JobStatus, u64)>, StateError> {
        let entry = self.store.entry(id.as_str()).await.map_err(|e| store(id, e))?;
        let Some(entry) = entry.filter(|e| e.operation == kv::Operation::Put) else {
            return Ok(None);
        };
        let status = serde_json::from_slice(&entry.value)
            .map_err(|e| StateError::Corrupt { id: id.to_string(), detail: e.to_string() })?;
        Ok(Some((status, entry.revision)))
    }

    /// Writes `status` if `id` has no state yet; otherwise returns the state it has.
    pub async fn create(&self, status: &JobStatus) -> Result<Option<JobStatus>, StateError> {
        let id = &status.id;
        for _ in 0..CAS_ATTEMPTS {
            match self.store.create(id.as_str(), encode(status)).await {
                Ok(_) => return Ok(None),
                Err(e) if e.kind() == CreateErrorKind::AlreadyExists => {
                    // Gone again between the two calls (its TTL): try once more.
                    if let Some((found, _)) = self.get(id).await? {
                        return Ok(Some(found));
                    }
                }
                Err(e) => return Err(store(id, e)),
            }
        }
        Err(StateError::Contended { id: id.to_string() })
    }

    /// Forgets `id` (a job whose message could not be published, so the same key can try again).
    pub async fn remove(&self, id: &JobId) -> Result<(), StateError> {
        self.store.purge(id.as_str()).await.map_err(|e| store(id, e))
    }

    /// Applies `change` to the state of `id` (`None` when it has none) and writes the result
    /// by compare-and-set, reading again and reapplying when another writer came first.
    /// Returns the state as written (or kept), `None` when the change kept "no state".
    pub async fn update(
        &self,
        id: &JobId,
        change: impl FnMut(&mut Option<JobStatus>) -> Change,
    ) -> Result<Option<JobStatus>, StateError> {
        Ok(self.change(id, Known::Unknown, change).await?.map(|(status, _)| status))
    }

    /// [`JobStates::update`] starting from what the caller `known`s (no read when it is right:
    /// one request instead of two); the state and revision written or kept.
    pub async fn change(
        &self,
        id: &JobId,
        known: Known,
        mut change: impl FnMut(&mut Option<JobStatus>) -> Change,
    ) -> Result<Option<(JobStatus, u64)>, StateError> {
        let mut known = known;
        for _ in 0..CAS_ATTEMPTS {
            let (mut status, revision) = match std::mem::replace(&mut known, Known::Unknown) {
                Known::Unknown => match self.get(id).await? {
                    Some((status, revision)) => (Some(status), Some(revision)),
                    None => (None, None),
                },
                Known::Absent => (None, None),
                Known::At(status, revision) => (Some(*status), Some(revision)),
            };
            if change(&mut status) == Change::Keep {
                return Ok(status.zip(revision));
            }
            let Some(new) = &mut status else { return Ok(None) };
            new.updated_ms = now_ms();
            let written = match revision {
                Some(revision) => {
                    self.store.update(id.as_str(), encode(new), revision).await.map_err(|e| {
                        (e.kind() == UpdateErrorKind::WrongLastRevision, e.to_string())
                    })
                }
                None => self
                    .store
                    .create(id.as_str(), encode(new))
                    .await
                    .map_err(|e| (e.kind() == CreateErrorKind::AlreadyExists, e.to_string())),
            };
            match written {
                Ok(revision) => return Ok(status.map(|status| (status, revision))),
                // Another writer came first: read what it wrote and decide again.
                Err((true, _)) => {}
                Err((false, detail)) => {
                    return Err(StateError::Store { id: id.to_string(), detail });
                }
            }
        }
        Err(StateError::Contended { id: id.to_string() })
    }
}

/// What a writer knows of a job's state before changing it.
#[derive(Debug, Clone)]
pub enum Known {
    /// Nothing: read it first.
    Unknown,
    /// That there is none (a job published straight to the stream).
    Absent,
    /// The state at a revision (as this pod last wrote or read it).
    At(Box<JobStatus>, u64),
}

fn encode(status: &JobStatus) -> Bytes {
    // A state is plain data: serialising it cannot fail.
    Bytes::from(serde_json::to_vec(status).unwrap_or_default())
}

fn store(id: &JobId, error: impl std::fmt::Display) -> StateError {
    StateError::Store { id: id.to_string(), detail: error.to_string() }
}
