//! The durable job contract: the message a producer publishes (or `POST /v1/jobs` publishes for
//! it), the state a job is in, the manifest it leaves beside its outputs, and the event that
//! announces its end. Versioned JSON; `api/schemas/job-v1.json` is this module's JSON Schema
//! (generated from these types, and a test fails when the two drift apart).
//!
//! An operation carries the same parameters as its HTTP route (`/v1/info`, `/v1/extract`,
//! `/v1/render`, `/v1/thumbnails`, `/v1/watermark`, `/v1/convert`) under the same names; the
//! render pod checks them with the routes' own parsers, so a job is held to the same limits.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The message format this code writes and reads.
pub const VERSION: u32 = 1;
/// Most operations one job may carry.
pub const MAX_OPERATIONS: usize = 16;
/// Longest idempotency key, in bytes.
pub const MAX_IDEMPOTENCY_KEY: usize = 256;
/// The longest input ETag (the S3 ETag of a multipart upload is about 40 characters).
pub const MAX_ETAG: usize = 256;
/// Largest job message, in bytes (a job names its document, it never carries it).
pub const MAX_MESSAGE_BYTES: usize = 64 << 10;

/// The names the pool uses on the broker unless its flags say otherwise.
pub mod defaults {
    /// The work-queue stream jobs are published to.
    pub const STREAM: &str = "RENDERPOOL_JOBS";
    /// The stream a job lands in when it keeps killing workers or pods.
    pub const DEAD_LETTER_STREAM: &str = "RENDERPOOL_JOBS_DEAD";
    /// The prefix of every subject: jobs are published on `<prefix>.submit`, dead letters on
    /// `<prefix>.dead`, each job's end on `<prefix>.events.<job id>`.
    pub const SUBJECT_PREFIX: &str = "renderpool.jobs";
    /// The durable pull consumer every render pod of the pool shares.
    pub const CONSUMER: &str = "render";
    /// The key-value bucket holding each job's state.
    pub const STATE_BUCKET: &str = "renderpool_jobs";
    /// Most jobs the stream holds; past it a publish is refused.
    pub const STREAM_MAX_MESSAGES: i64 = 1_000_000;
    /// Seconds a queued job may wait before the stream drops it: a week.
    pub const STREAM_MAX_AGE_SECS: u32 = 7 * 86_400;
    /// Replicas of the streams and the state bucket: a single NATS server's.
    pub const STREAM_REPLICAS: u8 = 1;
    /// The region S3 requests are signed for when none is given.
    pub const S3_REGION: &str = "us-east-1";
    /// Milliseconds a delivered job may go unacknowledged before the broker delivers it again.
    pub const ACK_WAIT_MS: u64 = 30_000;
    /// Deliveries lost with a worker or a pod after which a job goes to the dead-letter stream.
    pub const MAX_DELIVERIES: u32 = 3;
}

/// The names one queue has on a NATS account: its streams, subjects and state bucket. Pools that
/// share an account need queues of their own (one stream per pool: pools sharing one would take
/// each other's jobs). The default queue, `jobs`, has the [`defaults`] names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueNames {
    /// The work-queue stream.
    pub stream: String,
    /// The dead-letter stream.
    pub dead_letter_stream: String,
    /// The subjects' prefix.
    pub subject_prefix: String,
    /// The key-value bucket of the job states.
    pub state_bucket: String,
}

impl QueueNames {
    /// The default queue's name.
    pub const DEFAULT: &str = "jobs";

    /// The names of queue `queue` (lower-case letters, digits, `-` and `_`): stream
    /// `RENDERPOOL_<QUEUE>` and `RENDERPOOL_<QUEUE>_DEAD`, subjects under `renderpool.<queue>`,
    /// bucket `renderpool_<queue>` (NATS allows no `-` in stream names or `.` in buckets).
    pub fn of(queue: &str) -> Self {
        let upper = queue.to_ascii_uppercase().replace('-', "_");
        let stream = format!("RENDERPOOL_{upper}");
        Self {
            dead_letter_stream: format!("{stream}_DEAD"),
            stream,
            subject_prefix: format!("renderpool.{queue}"),
            state_bucket: format!("renderpool_{}", queue.replace('-', "_")),
        }
    }
}

/// The subjects under one prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subjects {
    /// Where jobs are published.
    pub submit: String,
    /// Where jobs that kept killing workers are moved, with the reason.
    pub dead: String,
    /// `<prefix>.events`: a job's end is published on `<events>.<job id>`.
    pub events: String,
}

impl Subjects {
    /// The subjects under `prefix` (e.g. [`defaults::SUBJECT_PREFIX`]).
    pub fn under(prefix: &str) -> Self {
        Self {
            submit: format!("{prefix}.submit"),
            dead: format!("{prefix}.dead"),
            events: format!("{prefix}.events"),
        }
    }

    /// The subject `id`'s end is published on.
    pub fn event(&self, id: &JobId) -> String {
        format!("{}.{id}", self.events)
    }
}

/// A job: what to read, what to do with it, where to put the results, whom to tell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct JobMessage {
    /// The message format: 1.
    #[cfg_attr(test, schemars(range(min = 1, max = 1)))]
    pub version: u32,
    /// The same key twice is one job: its id is derived from the key (see `JobId::from_key`),
    /// so a second message or `POST` with it finds the first job instead of starting another.
    /// Also the `Nats-Msg-Id` to publish with, so the broker drops a duplicate publish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, schemars(length(min = 1, max = 256)))]
    pub idempotency_key: Option<String>,
    /// The document.
    pub input: Input,
    /// What to do with it, in order (1 to 16 operations).
    #[cfg_attr(test, schemars(length(min = 1, max = 16)))]
    pub operations: Vec<Operation>,
    /// Where the outputs go.
    pub output: Output,
    /// Whom to tell when the job ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<Webhook>,
    /// Milliseconds from publication by which the job must be done; a job still queued past
    /// it fails with `deadline_exceeded` without running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
}

/// The document a job reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// `s3://bucket/key` (or `gs://`, `az://container/key`, whichever store the pool uses): an
    /// object in a bucket the pool may read.
    pub url: String,
    /// The password of an encrypted PDF (what `X-Pdf-Password` is to the HTTP routes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// The object's ETag exactly as the store gave it (S3 quotes it: `"9b2cf5..."`): the job
    /// reads that version and no other. A pod that already holds that version starts without
    /// asking the store; otherwise its read is conditional (`If-Match`), and an object changed
    /// since fails the job with `input_changed`. `POST /v1/jobs` with the document as its body
    /// sets it to the stored upload's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, schemars(length(min = 1, max = 256)))]
    pub etag: Option<String>,
}

/// Where a job's outputs go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Output {
    /// `s3://bucket/prefix` (or `gs://`, `az://`, as the input): outputs are written under
    /// `<prefix>/<job id>/`, the manifest (`manifest.json`) last, in a bucket the pool may write.
    pub url: String,
}

/// The webhook a job's end is POSTed to, signed the Standard Webhooks way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// `https://...` or `http://...`; private and loopback addresses only where the pool allows
    /// them.
    pub url: String,
}

/// One operation, with its HTTP route's query parameters (numbers as numbers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Operation {
    /// `/v1/info`: page count, sizes, rotation, encryption, metadata (one JSON output).
    Info {},
    /// `/v1/extract`: text per page (one JSON output).
    Extract {
        /// Pages such as `1-3,7`; default all (up to the pod's page limit).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pages: Option<String>,
        /// Most characters in all.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_chars: Option<u64>,
    },
    /// `/v1/render`: page images, one output per page. `page` is the route's own parameter;
    /// a job may name several with `pages` instead (not both).
    Render {
        /// One 1-based page (default 1 when `pages` is not given).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        page: Option<u32>,
        /// Several pages such as `1-3,7`, within the pod's page limit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pages: Option<String>,
        /// Resolution (default 150); not with `width`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dpi: Option<f64>,
        /// Width in pixels; not with `dpi`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        width: Option<u32>,
        /// `png` (default), `jpeg` or `webp`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        format: Option<String>,
        /// 1 (smallest) to 100 (best), for `jpeg` (default 80) and a lossy `webp`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        quality: Option<u8>,
    },
    /// `/v1/thumbnails`: small page images, one output per page, within the filmstrip caps.
    Thumbnails {
        /// Pages such as `1-20`; default all (up to the pod's page limit).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pages: Option<String>,
        /// Resolution; not with `width`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dpi: Option<f64>,
        /// Width in pixels (default 160); not with `dpi`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        width: Option<u32>,
        /// `png` (default), `jpeg` or `webp`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        format: Option<String>,
        /// 1 (smallest) to 100 (best), for `jpeg` (default 80) and a lossy `webp`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        quality: Option<u8>,
    },
    /// `/v1/watermark`: the PDF with `text` stamped on every page (one PDF output).
    Watermark {
        /// The watermark, at most 200 characters.
        text: String,
    },
    /// `/v1/convert`: an Office document as PDF through the Gotenberg pool (one PDF output).
    Convert {
        /// PDF/A level: `1b`, `2b` or `3b`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pdfa: Option<String>,
        /// Pages to keep, such as `1-3`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pages: Option<String>,
    },
}

impl Operation {
    /// The operation's name, as `op` spells it (and its HTTP route ends).
    pub fn name(&self) -> &'static str {
        match self {
            Operation::Info {} => "info",
            Operation::Extract { .. } => "extract",
            Operation::Render { .. } => "render",
            Operation::Thumbnails { .. } => "thumbnails",
            Operation::Watermark { .. } => "watermark",
            Operation::Convert { .. } => "convert",
        }
    }

    /// The parameters as its HTTP route's query string would carry them (name to text), for the
    /// route's own parser.
    pub fn query(&self) -> BTreeMap<String, String> {
        let mut query = BTreeMap::new();
        let mut put = |name: &str, value: Option<String>| {
            if let Some(value) = value {
                query.insert(name.to_string(), value);
            }
        };
        match self {
            Operation::Info {} => {}
            Operation::Extract { pages, max_chars } => {
                put("pages", pages.clone());
                put("max_chars", max_chars.map(|n| n.to_string()));
            }
            Operation::Render { page, pages, dpi, width, format, quality } => {
                put("page", page.map(|n| n.to_string()));
                put("pages", pages.clone());
                put("dpi", dpi.map(|n| n.to_string()));
                put("width", width.map(|n| n.to_string()));
                put("format", format.clone());
                put("quality", quality.map(|n| n.to_string()));
            }
            Operation::Thumbnails { pages, dpi, width, format, quality } => {
                put("pages", pages.clone());
                put("dpi", dpi.map(|n| n.to_string()));
                put("width", width.map(|n| n.to_string()));
                put("format", format.clone());
                put("quality", quality.map(|n| n.to_string()));
            }
            Operation::Watermark { text } => put("text", Some(text.clone())),
            Operation::Convert { pdfa, pages } => {
                put("pdfa", pdfa.clone());
                put("pages", pages.clone());
            }
        }
        query
    }
}

/// Which kind of object store a URL names: the URL's scheme. A pool uses one store, and takes
/// only URLs of its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheme {
    /// `s3://`: Amazon S3 or an S3-compatible server.
    S3,
    /// `gs://`: Google Cloud Storage.
    Gs,
    /// `az://`: Azure Blob Storage (the "bucket" is the container).
    Az,
}

impl Scheme {
    /// Every scheme, in the order messages list them.
    pub const ALL: [Scheme; 3] = [Scheme::S3, Scheme::Gs, Scheme::Az];

    /// `s3://`, `gs://` or `az://`.
    pub fn prefix(self) -> &'static str {
        match self {
            Scheme::S3 => "s3://",
            Scheme::Gs => "gs://",
            Scheme::Az => "az://",
        }
    }

    /// The store's name, for messages.
    pub fn store(self) -> &'static str {
        match self {
            Scheme::S3 => "S3",
            Scheme::Gs => "Google Cloud Storage",
            Scheme::Az => "Azure Blob Storage",
        }
    }

    /// Whether the store would take `name` as a bucket (a container on Azure): 3 to 63 lower-case
    /// letters, digits and the store's separators (S3: `-` `.`; GCS: `-` `_` `.`; Azure: `-`, never
    /// two in a row), starting and ending with a letter or digit.
    pub fn valid_bucket(self, name: &str) -> bool {
        let separator = |b: u8| match self {
            Scheme::S3 => b == b'-' || b == b'.',
            Scheme::Gs => b == b'-' || b == b'_' || b == b'.',
            Scheme::Az => b == b'-',
        };
        (3..=63).contains(&name.len())
            && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || separator(b))
            && name.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
            && name.as_bytes().last().is_some_and(u8::is_ascii_alphanumeric)
            && !(self == Scheme::Az && name.contains("--"))
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.prefix())
    }
}

/// An object's place: `s3://bucket/key`, `gs://bucket/key` or `az://container/key`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectUrl {
    /// The kind of store.
    pub scheme: Scheme,
    /// The bucket (the container on Azure).
    pub bucket: String,
    /// The key within it (may be empty for a prefix at the bucket's root).
    pub key: String,
}

impl ObjectUrl {
    /// Parses `s3://bucket/key`, `gs://bucket/key` or `az://container/key`; the bucket must be
    /// a name its store takes.
    pub fn parse(url: &str) -> Result<Self, ContractError> {
        let bad = |why: &str| ContractError::Url { url: url.to_string(), why: why.to_string() };
        let (scheme, rest) = Scheme::ALL
            .into_iter()
            .find_map(|scheme| url.strip_prefix(scheme.prefix()).map(|rest| (scheme, rest)))
            .ok_or_else(|| bad("it must start with s3://, gs:// or az://"))?;
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        if !scheme.valid_bucket(bucket) {
            return Err(bad(&format!("the bucket name is not one {} takes", scheme.store())));
        }
        if key.split('/').any(|part| part == "." || part == "..") || key.contains('\0') {
            return Err(bad("the key has a . or .. segment or a NUL"));
        }
        if key.len() > 1024 {
            return Err(bad("the key is longer than 1024 bytes"));
        }
        Ok(Self { scheme, bucket: bucket.to_string(), key: key.to_string() })
    }

    /// The object at `name` under this prefix (one `/` between them).
    pub fn join(&self, name: &str) -> Self {
        let key = match self.key.trim_end_matches('/') {
            "" => name.to_string(),
            prefix => format!("{prefix}/{name}"),
        };
        Self { scheme: self.scheme, bucket: self.bucket.clone(), key }
    }
}

impl fmt::Display for ObjectUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}/{}", self.scheme, self.bucket, self.key)
    }
}

/// A job's id: 32 lower-case hex digits. Derived from the idempotency key when there is one,
/// so the same key is the same job wherever it arrives.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(try_from = "String", into = "String")]
pub struct JobId(String);

impl JobId {
    /// The id of the job with idempotency key `key`: SHA-256 of the key, first 16 bytes in hex.
    pub fn from_key(key: &str) -> Self {
        Self::of_bytes(key.as_bytes())
    }

    /// An id from the first 16 bytes of SHA-256 of `bytes`.
    pub fn of_bytes(bytes: &[u8]) -> Self {
        let digest = Sha256::digest(bytes);
        Self(digest[..16].iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for JobId {
    type Error = ContractError;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        if value.len() == 32
            && value.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            Ok(Self(value))
        } else {
            Err(ContractError::JobId(value))
        }
    }
}

impl From<JobId> for String {
    fn from(id: JobId) -> String {
        id.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What is wrong with a job message, before any parameter of an operation is looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContractError {
    /// Not JSON, or not this shape.
    Malformed(String),
    /// A `version` this code does not know.
    Version(u32),
    /// No operation, or more than [`MAX_OPERATIONS`].
    Operations(usize),
    /// A bad object URL.
    Url { url: String, why: String },
    /// A webhook URL that is not http(s).
    Webhook(String),
    /// An empty or too long idempotency key.
    IdempotencyKey(usize),
    /// An input ETag that cannot be one: empty, too long, or not visible ASCII.
    Etag(String),
    /// Larger than [`MAX_MESSAGE_BYTES`].
    TooLarge(usize),
    /// Not a job id.
    JobId(String),
}

impl fmt::Display for ContractError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ContractError::Malformed(why) => write!(f, "not a job message: {why}"),
            ContractError::Version(v) => {
                write!(f, "job message version {v} is not known here (this pool reads {VERSION})")
            }
            ContractError::Operations(n) => {
                write!(f, "a job has 1 to {MAX_OPERATIONS} operations, this one {n}")
            }
            ContractError::Url { url, why } => write!(f, "{url:?} is not an object URL: {why}"),
            ContractError::Webhook(url) => {
                write!(f, "webhook URL {url:?} is not an http:// or https:// URL with a host")
            }
            ContractError::IdempotencyKey(len) => {
                write!(f, "an idempotency key has 1 to {MAX_IDEMPOTENCY_KEY} bytes, this one {len}")
            }
            ContractError::Etag(etag) => write!(
                f,
                "input etag {etag:?} is not an ETag: 1 to {MAX_ETAG} visible ASCII characters"
            ),
            ContractError::TooLarge(len) => {
                write!(f, "a job message has at most {MAX_MESSAGE_BYTES} bytes, this one {len}")
            }
            ContractError::JobId(id) => write!(f, "{id:?} is not a job id (32 hex digits)"),
        }
    }
}

impl std::error::Error for ContractError {}

/// A job message read and checked, with its URLs parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    /// The message as sent.
    pub message: JobMessage,
    /// Its input.
    pub input: ObjectUrl,
    /// Its output prefix.
    pub output: ObjectUrl,
}

impl JobMessage {
    /// Parses and checks a message's bytes: size, JSON shape, version, operation count, URLs,
    /// webhook, key. The operations' parameters are the render pod's to check.
    pub fn read(bytes: &[u8]) -> Result<Checked, ContractError> {
        if bytes.len() > MAX_MESSAGE_BYTES {
            return Err(ContractError::TooLarge(bytes.len()));
        }
        // The version first, so a newer message says so rather than failing on a new field.
        let version: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| ContractError::Malformed(e.to_string()))?;
        if let Some(v) = version.get("version").and_then(serde_json::Value::as_u64)
            && v != u64::from(VERSION)
        {
            return Err(ContractError::Version(u32::try_from(v).unwrap_or(u32::MAX)));
        }
        let message: JobMessage =
            serde_json::from_value(version).map_err(|e| ContractError::Malformed(e.to_string()))?;
        message.check()
    }

    /// The job's id: from its idempotency key, or, for a message published without one, from
    /// the stream sequence that carries it (the same on every redelivery).
    pub fn job_id(&self, stream_sequence: u64) -> JobId {
        match &self.idempotency_key {
            Some(key) => JobId::from_key(key),
            None => JobId::of_bytes(format!("stream-sequence:{stream_sequence}").as_bytes()),
        }
    }

    /// Checks a message built in code (what [`JobMessage::read`] checks after parsing).
    pub fn check(self) -> Result<Checked, ContractError> {
        if self.version != VERSION {
            return Err(ContractError::Version(self.version));
        }
        if self.operations.is_empty() || self.operations.len() > MAX_OPERATIONS {
            return Err(ContractError::Operations(self.operations.len()));
        }
        if let Some(key) = &self.idempotency_key
            && (key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY)
        {
            return Err(ContractError::IdempotencyKey(key.len()));
        }
        if let Some(webhook) = &self.webhook
            && webhook_host(&webhook.url).is_none()
        {
            return Err(ContractError::Webhook(webhook.url.clone()));
        }
        if let Some(etag) = &self.input.etag
            && !is_etag(etag)
        {
            return Err(ContractError::Etag(etag.clone()));
        }
        let input = ObjectUrl::parse(&self.input.url)?;
        if input.key.is_empty() || input.key.ends_with('/') {
            return Err(ContractError::Url {
                url: self.input.url.clone(),
                why: "the input names no object".into(),
            });
        }
        let output = ObjectUrl::parse(&self.output.url)?;
        Ok(Checked { message: self, input, output })
    }
}

/// Whether `etag` can be an object's ETag as a store gives it: 1 to [`MAX_ETAG`] visible ASCII
/// characters (a job's `input.etag`, a document route's `source_etag=`).
pub fn is_etag(etag: &str) -> bool {
    !etag.is_empty() && etag.len() <= MAX_ETAG && etag.bytes().all(|b| b.is_ascii_graphic())
}

/// The host of an `http://` or `https://` URL, without port or brackets; `None` for anything
/// else.
pub fn webhook_host(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => host_port.split(':').next()?,
    };
    (!host.is_empty()).then_some(host)
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Published, not started (or waiting to be delivered again).
    Queued,
    /// A pod is working on it.
    Running,
    /// Every output and the manifest are written.
    Done,
    /// It ended without a manifest; `error` says why.
    Failed,
    /// Cancelled by `DELETE /v1/jobs/{id}` before it ended.
    Cancelled,
}

impl State {
    /// Done, failed or cancelled: nothing more happens to the job.
    pub fn is_final(self) -> bool {
        matches!(self, State::Done | State::Failed | State::Cancelled)
    }
}

/// Outputs written of outputs asked for (a page image is one, a JSON or PDF output one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Progress {
    /// Written so far.
    pub done: u32,
    /// Asked for; 0 until the document's page count is known.
    pub total: u32,
}

/// Why a job failed: the HTTP API's error code and status for the same failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Failure {
    /// The HTTP API's machine-readable code (`unreadable_document`, `worker_crashed`, ...).
    pub code: String,
    /// The status the HTTP API answers the same failure with.
    pub status: u16,
    /// What went wrong, for a person.
    pub message: String,
    /// The operation (0-based index) it failed at, when it failed at one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<usize>,
}

/// How the job's webhook went.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct WebhookStatus {
    /// POSTs made.
    pub attempts: u32,
    /// A 2xx answer was had.
    pub delivered: bool,
    /// The last attempt's failure, if it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A job's state as `GET /v1/jobs/{id}` shows it and the state bucket holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct JobStatus {
    /// The job.
    pub id: JobId,
    /// Where it is.
    pub state: State,
    /// Outputs written of outputs asked for.
    pub progress: Progress,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Failure>,
    /// The manifest's URL, once written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_url: Option<String>,
    /// The manifest itself (in `GET` answers of a done job).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<Manifest>,
    /// Times the broker delivered it to a pod.
    pub deliveries: u64,
    /// Times it killed a worker, stalled LibreOffice or was lost with its pod; at the pool's
    /// limit it goes to the dead-letter stream.
    #[serde(default)]
    pub strikes: u32,
    /// It was moved to the dead-letter stream (it kept killing workers or pods).
    #[serde(default)]
    pub dead_lettered: bool,
    /// The stream sequence of the message that carries it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_sequence: Option<u64>,
    /// The webhook, when the job has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookStatus>,
    /// When the state was first written, milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// When the state last changed, milliseconds since the Unix epoch.
    pub updated_ms: u64,
    /// When a pod last started running it, milliseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<u64>,
    /// The pod running it was told to stop (deleted, drained, scaled in): should that pod go
    /// before it hands the job back, the next delivery counts no strike against the job.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pod_stopping: bool,
}

impl JobStatus {
    /// A queued job, known from `now_ms`.
    pub fn queued(id: JobId, now_ms: u64) -> Self {
        Self {
            id,
            state: State::Queued,
            progress: Progress::default(),
            error: None,
            manifest_url: None,
            manifest: None,
            deliveries: 0,
            strikes: 0,
            dead_lettered: false,
            stream_sequence: None,
            webhook: None,
            created_ms: now_ms,
            updated_ms: now_ms,
            started_ms: None,
            pod_stopping: false,
        }
    }
}

/// What a done job wrote, written last (`<output>/<job id>/manifest.json`): whoever sees it
/// sees every output it lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Manifest {
    /// The manifest format: 1.
    pub version: u32,
    /// The job.
    pub job: JobId,
    /// The document as read.
    pub input: InputRead,
    /// Each operation's outputs, in the job's order.
    pub operations: Vec<OperationOutputs>,
}

/// The document a job read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct InputRead {
    /// Its URL.
    pub url: String,
    /// Its ETag when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// Its size.
    pub bytes: u64,
}

/// One operation's outputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct OperationOutputs {
    /// The operation's name.
    pub op: String,
    /// Its outputs, pages ascending.
    pub outputs: Vec<OutputObject>,
}

/// One object a job wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct OutputObject {
    /// `s3://bucket/key` (`gs://`, `az://` on those stores).
    pub url: String,
    /// Its size.
    pub bytes: u64,
    /// Its media type.
    pub content_type: String,
    /// The page it shows, for a page image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    /// Pixels, for a page image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    /// Pixels, for a page image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
}

/// A job's end, published on `<prefix>.events.<job id>` and POSTed to its webhook (the
/// Standard Webhooks payload shape: `type`, `timestamp`, `data`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct JobEvent {
    /// `job.done`, `job.failed` or `job.cancelled`.
    #[serde(rename = "type")]
    pub kind: String,
    /// When the job ended, RFC 3339 in UTC.
    pub timestamp: String,
    /// The job's final state.
    pub data: JobStatus,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    #[test]
    fn the_default_queue_has_the_default_names_and_a_named_one_its_own() {
        let default = QueueNames::of(QueueNames::DEFAULT);
        assert_eq!(default.stream, defaults::STREAM);
        assert_eq!(default.dead_letter_stream, defaults::DEAD_LETTER_STREAM);
        assert_eq!(default.subject_prefix, defaults::SUBJECT_PREFIX);
        assert_eq!(default.state_bucket, defaults::STATE_BUCKET);
        let named = QueueNames::of("shop-extract");
        assert_eq!(named.stream, "RENDERPOOL_SHOP_EXTRACT");
        assert_eq!(named.dead_letter_stream, "RENDERPOOL_SHOP_EXTRACT_DEAD");
        assert_eq!(named.subject_prefix, "renderpool.shop-extract");
        assert_eq!(named.state_bucket, "renderpool_shop_extract");
    }

    const SCHEMA: &str = "api/schemas/job-v1.json";
    const BLESS: &str = "RENDERPOOL_BLESS=1 cargo test -p renderpool-api --lib jobs";

    fn example() -> serde_json::Value {
        serde_json::json!({
            "version": 1,
            "idempotency_key": "upload-42",
            "input": {"url": "s3://uploads/docs/42.pdf", "etag": "\"9b2cf535f27731c974343645a3985328\""},
            "operations": [
                {"op": "info"},
                {"op": "extract", "pages": "1-3", "max_chars": 1000},
                {"op": "render", "pages": "1-2", "dpi": 96.5, "format": "jpeg"},
                {"op": "thumbnails", "width": 160},
                {"op": "watermark", "text": "COPY"},
                {"op": "convert", "pdfa": "2b"}
            ],
            "output": {"url": "s3://results/jobs"},
            "webhook": {"url": "https://example.com/hooks/render"},
            "deadline_ms": 600000
        })
    }

    fn schema_text() -> String {
        // The message is the root; what a producer reads back (state, event) is in `$defs`.
        let mut generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
        generator.subschema_for::<JobStatus>();
        generator.subschema_for::<JobEvent>();
        let schema = generator.into_root_schema_for::<JobMessage>();
        let mut text = serde_json::to_string_pretty(&schema).unwrap();
        text.push('\n');
        text
    }

    /// The checked-in schema is what the types say (the one source is the Rust type).
    #[test]
    fn the_checked_in_schema_is_the_types() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(SCHEMA);
        let generated = schema_text();
        if std::env::var_os("RENDERPOOL_BLESS").is_some_and(|v| v == "1") {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &generated).unwrap();
        }
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(generated == checked_in, "{SCHEMA} is out of date: run `{BLESS}`");
    }

    /// The schema is read the way a producer in another language reads it: every operation is
    /// there with its parameters, and what the type refuses the schema refuses too.
    #[test]
    fn the_schema_describes_what_the_type_reads() {
        let schema: serde_json::Value = serde_json::from_str(&schema_text()).unwrap();
        let defs = &schema["$defs"];
        let job = &schema;
        assert!(defs["JobStatus"].is_object() && defs["JobEvent"].is_object());
        let required: Vec<&str> =
            job["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        for field in ["version", "input", "operations", "output"] {
            assert!(required.contains(&field), "{field} is required");
        }
        assert_eq!(job["additionalProperties"], false);
        let operations = &job["properties"]["operations"];
        assert_eq!(
            (operations["minItems"].as_u64(), operations["maxItems"].as_u64()),
            (Some(1), Some(MAX_OPERATIONS as u64))
        );
        let key = &job["properties"]["idempotency_key"];
        assert_eq!(key["maxLength"].as_u64(), Some(MAX_IDEMPOTENCY_KEY as u64));
        let etag = &defs["Input"]["properties"]["etag"];
        assert_eq!(etag["maxLength"].as_u64(), Some(MAX_ETAG as u64));
        assert_eq!(job["properties"]["version"]["maximum"].as_u64(), Some(u64::from(VERSION)));
        let variants = defs["Operation"]["oneOf"].as_array().unwrap();
        let names: Vec<&str> =
            variants.iter().map(|v| v["properties"]["op"]["const"].as_str().unwrap()).collect();
        assert_eq!(names, ["info", "extract", "render", "thumbnails", "watermark", "convert"]);
        for variant in variants {
            assert_eq!(variant["additionalProperties"], false, "{variant}");
            let name = variant["properties"]["op"]["const"].as_str().unwrap();
            // Every parameter the schema names is one the type (and so the route) reads.
            for property in variant["properties"].as_object().unwrap().keys() {
                if property == "op" {
                    continue;
                }
                let mut message = example();
                let op = serde_json::json!({"op": name, property.as_str(): sample(property)});
                message["operations"] = serde_json::json!([op]);
                let read = JobMessage::read(message.to_string().as_bytes()).unwrap();
                assert!(
                    read.message.operations[0].query().contains_key(property),
                    "{name}.{property}"
                );
            }
        }
    }

    fn sample(property: &str) -> serde_json::Value {
        match property {
            "page" | "width" | "max_chars" | "quality" => serde_json::json!(3),
            "dpi" => serde_json::json!(96.5),
            _ => serde_json::json!("1-2"),
        }
    }

    #[test]
    fn a_message_round_trips_and_its_operations_become_route_queries() {
        let read = JobMessage::read(example().to_string().as_bytes()).unwrap();
        assert_eq!(
            read.input,
            ObjectUrl { scheme: Scheme::S3, bucket: "uploads".into(), key: "docs/42.pdf".into() }
        );
        assert_eq!(read.output.join("abc").to_string(), "s3://results/jobs/abc");
        let again: serde_json::Value = serde_json::to_value(&read.message).unwrap();
        assert_eq!(again, example());
        let render = &read.message.operations[2];
        let query = render.query();
        assert_eq!(query["pages"], "1-2");
        assert_eq!(query["dpi"], "96.5");
        assert_eq!(query["format"], "jpeg");
        assert!(!query.contains_key("width"));
    }

    #[test]
    fn bad_messages_are_refused_with_the_reason() {
        let with = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut m = example();
            f(&mut m);
            JobMessage::read(m.to_string().as_bytes()).unwrap_err()
        };
        assert!(matches!(JobMessage::read(b"{not json"), Err(ContractError::Malformed(_))));
        assert_eq!(with(&|m| m["version"] = 2.into()), ContractError::Version(2));
        assert_eq!(
            with(&|m| m["operations"] = serde_json::json!([])),
            ContractError::Operations(0)
        );
        assert!(matches!(with(&|m| m["surprise"] = 1.into()), ContractError::Malformed(_)));
        assert!(matches!(
            with(&|m| m["operations"] = serde_json::json!([{"op": "info", "dpi": 3}])),
            ContractError::Malformed(_)
        ));
        assert!(matches!(
            with(&|m| m["operations"] = serde_json::json!([{"op": "explode"}])),
            ContractError::Malformed(_)
        ));
        assert!(matches!(
            with(&|m| m["input"]["url"] = "http://x/y".into()),
            ContractError::Url { .. }
        ));
        assert!(matches!(
            with(&|m| m["input"]["url"] = "s3://uploads/".into()),
            ContractError::Url { .. }
        ));
        assert!(matches!(
            with(&|m| m["input"]["url"] = "s3://Up/x".into()),
            ContractError::Url { .. }
        ));
        assert!(matches!(
            with(&|m| m["input"]["url"] = "s3://ups/a/../b".into()),
            ContractError::Url { .. }
        ));
        assert!(matches!(
            with(&|m| m["webhook"]["url"] = "ftp://x".into()),
            ContractError::Webhook(_)
        ));
        assert_eq!(with(&|m| m["idempotency_key"] = "".into()), ContractError::IdempotencyKey(0));
        for etag in ["", "\"a b\"", "\"\u{e9}\""] {
            assert_eq!(
                with(&|m| m["input"]["etag"] = etag.into()),
                ContractError::Etag(etag.into()),
                "{etag:?}"
            );
        }
        let long = "e".repeat(MAX_ETAG + 1);
        assert_eq!(with(&|m| m["input"]["etag"] = long.clone().into()), ContractError::Etag(long));
        let huge = vec![b' '; MAX_MESSAGE_BYTES + 1];
        assert_eq!(JobMessage::read(&huge).unwrap_err(), ContractError::TooLarge(huge.len()));
    }

    #[test]
    fn object_urls_name_their_store_and_its_bucket_rules() {
        for (url, scheme, bucket, key) in [
            ("s3://uploads/a/b.pdf", Scheme::S3, "uploads", "a/b.pdf"),
            ("gs://my_uploads/a.pdf", Scheme::Gs, "my_uploads", "a.pdf"),
            ("az://up-loads/x/", Scheme::Az, "up-loads", "x/"),
            ("az://results", Scheme::Az, "results", ""),
        ] {
            let parsed = ObjectUrl::parse(url).unwrap();
            assert_eq!(parsed, ObjectUrl { scheme, bucket: bucket.into(), key: key.into() });
            assert_eq!(
                parsed.join("m.json").to_string(),
                format!("{scheme}{bucket}/{}", {
                    let prefix = key.trim_end_matches('/');
                    if prefix.is_empty() {
                        "m.json".to_string()
                    } else {
                        format!("{prefix}/m.json")
                    }
                })
            );
        }
        // Each store's own bucket rules: `_` only on GCS, `.` not on Azure, no `--` on Azure.
        for url in ["s3://my_uploads/a", "az://up.loads/a", "az://up--loads/a", "gs://Up/a"] {
            let err = ObjectUrl::parse(url).unwrap_err();
            assert!(
                matches!(&err, ContractError::Url { why, .. } if why.contains("bucket name")),
                "{url}: {err:?}"
            );
        }
        let err = ObjectUrl::parse("abfs://c/a").unwrap_err();
        assert!(matches!(&err, ContractError::Url { why, .. } if why.contains("gs://")), "{err:?}");
    }

    #[test]
    fn job_ids_come_from_keys_and_are_checked() {
        let id = JobId::from_key("upload-42");
        assert_eq!(id.as_str().len(), 32);
        assert_eq!(id, JobId::from_key("upload-42"));
        assert_ne!(id, JobId::from_key("upload-43"));
        assert_eq!(JobId::try_from(id.to_string()).unwrap(), id);
        assert!(JobId::try_from("../etc".to_string()).is_err());
        assert!(JobId::try_from("A".repeat(32)).is_err());
    }

    #[test]
    fn webhook_hosts() {
        assert_eq!(webhook_host("https://example.com/x"), Some("example.com"));
        assert_eq!(webhook_host("http://user:pw@10.0.0.1:8080/x"), Some("10.0.0.1"));
        assert_eq!(webhook_host("http://[::1]:80/"), Some("::1"));
        assert_eq!(webhook_host("http:///x"), None);
        assert_eq!(webhook_host("file:///etc/passwd"), None);
    }
}
