//! A document as the executor takes it: bytes, their hash (computed once, by whoever received
//! them) and the password.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// Documents above this are hashed on the blocking pool by [`DocHash::of_shared`], so the async
/// threads stay free; below it (BLAKE3 hashes 1 MiB in about 0.2 ms) the hand-off to another
/// thread costs more than it saves.
const INLINE_HASH_BYTES: usize = 1 << 20;

/// BLAKE3 of a document's bytes: its identity for the worker's open-document cache, the poison
/// list and the supervisor's "this worker already holds it" check. Cryptographic, because a
/// collision would let one upload be answered from another's document; BLAKE3 rather than
/// sha256 because the front hashes every upload and sha256 measured 17% of its CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DocHash(pub [u8; 32]);

impl DocHash {
    /// Hashes a document (CPU work: call it off the async threads for large bodies).
    pub fn of(bytes: &[u8]) -> Self {
        Self(*blake3::hash(bytes).as_bytes())
    }

    /// [`DocHash::of`] from async code: on the blocking pool when `bytes` is large. Fails only
    /// when the hashing task panicked.
    pub async fn of_shared(bytes: &Bytes) -> Result<Self, tokio::task::JoinError> {
        if bytes.len() <= INLINE_HASH_BYTES {
            return Ok(Self::of(bytes));
        }
        let bytes = bytes.clone();
        tokio::task::spawn_blocking(move || Self::of(&bytes)).await
    }
}

/// One document for [`super::Executor::execute`].
#[derive(Debug, Clone, Copy)]
pub struct Document<'a> {
    /// The file's bytes.
    pub bytes: &'a [u8],
    /// `DocHash::of(bytes)`, passed in so a worker never hashes what its supervisor hashed.
    pub hash: DocHash,
    /// Password for an encrypted document; empty counts as none.
    pub password: Option<&'a str>,
}

impl<'a> Document<'a> {
    /// A document whose hash is computed here.
    pub fn new(bytes: &'a [u8], password: Option<&'a str>) -> Self {
        Self { bytes, hash: DocHash::of(bytes), password }
    }

    /// The password, with an empty one meaning none.
    pub fn password(&self) -> Option<&'a str> {
        self.password.filter(|p| !p.is_empty())
    }
}
