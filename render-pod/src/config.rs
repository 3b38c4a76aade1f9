//! `render-pod serve` settings: every flag also reads an environment variable.

pub mod jobs;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use renderpool_api::render_pod::{self as pod, env};
use renderpool_runtime::logging::LogFormat;
use renderpool_sizing::{SUPERVISOR_AT_REST, byte_budget, parse_memory_bytes, supervisor_share};

use crate::engine::Probe;
use crate::engine::worker::WorkerOptions;
use crate::http::ThumbnailLimits;
use crate::http::body::BodyLimits;
use crate::http::budget::{ADMIT_SHARE, admit_bytes};
use crate::http::server::ConnectionLimits;
use crate::office::OfficeConfig;
use crate::office::detect::inflation::InflationLimits;
use crate::ops::OpLimits;

/// Flags of `render-pod serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = env::LISTEN, default_value_t = SocketAddr::from((Ipv4Addr::LOCALHOST, pod::PORT)))]
    pub listen: SocketAddr,
    /// Slot count, replacing the one derived from the cgroup limits.
    #[arg(long, env = env::SLOTS)]
    pub slots: Option<u32>,
    /// Memory budget per worker, e.g. 512Mi: the slot count, each worker's hard memory ceiling
    /// and its recycle threshold derive from it.
    #[arg(long, env = env::MEMORY_PER_SLOT, value_parser = parse_memory_bytes,
          default_value_t = pod::MEMORY_PER_SLOT.bytes())]
    pub memory_per_slot: u64,
    /// Hold each worker to --memory-per-slot (RLIMIT_DATA): a document that needs more fails its
    /// own job with 422 memory_limit_exceeded. `false` only for measuring what it costs.
    #[arg(long, env = env::MEMORY_CEILING, default_value_t = true,
          action = clap::ArgAction::Set)]
    pub memory_ceiling: bool,
    /// Memory kept for the supervisor before slots are counted, e.g. 256Mi. Default: 32Mi at
    /// rest + --office-cache-bytes + 2 x --max-body-bytes (the upload and answer budgets, one
    /// largest body each), at least 128Mi.
    #[arg(long, env = env::SUPERVISOR_OVERHEAD, value_parser = parse_memory_bytes)]
    pub supervisor_overhead: Option<u64>,
    /// Jobs that may wait for a slot; beyond this requests get 503 at once.
    #[arg(long, env = env::QUEUE_DEPTH,
          default_value_t = usize::from(pod::QUEUE_DEPTH))]
    pub queue_depth: usize,
    /// Milliseconds from arrival after which a job is dropped or its worker killed.
    #[arg(long, env = env::JOB_DEADLINE_MS,
          default_value_t = u64::from(pod::JOB_DEADLINE_MS))]
    pub job_deadline_ms: u64,
    /// Milliseconds between SIGTERM (readiness goes false at once) and refusing new work.
    #[arg(long, env = env::DRAIN_DELAY_MS,
          default_value_t = u64::from(pod::DRAIN_DELAY_MS))]
    pub drain_delay_ms: u64,
    /// Milliseconds in-flight requests get to finish after new work stops being taken (by
    /// default one job deadline's default, so a job taken just before finishes).
    #[arg(long, env = env::GRACE_PERIOD_MS, default_value_t = u64::from(pod::JOB_DEADLINE_MS))]
    pub grace_period_ms: u64,
    /// Largest accepted request body, e.g. 100Mi.
    #[arg(long, env = env::MAX_BODY_BYTES, value_parser = parse_memory_bytes,
          default_value_t = pod::MAX_BODY.bytes())]
    pub max_body_bytes: u64,
    /// Bytes request bodies may hold in the supervisor at once, e.g. 32Mi; a body is reserved
    /// before it is read (up to --upload-admit-share of the budget, the rest as it arrives),
    /// and past the budget answered 503 with Retry-After. Default: half of what
    /// --supervisor-overhead leaves after 32Mi (the supervisor at rest) and
    /// --office-cache-bytes (the other half is the answer budget's).
    #[arg(long, env = env::UPLOAD_BUDGET, value_parser = parse_memory_bytes)]
    pub upload_budget: Option<u64>,
    /// Most of the upload budget one body reserves when admitted, as a fraction above 0 and at
    /// most 1: a body declared larger holds this much at once and the rest as its bytes arrive
    /// (503 upload_budget_exhausted mid-body if by then the budget has no room), so one slow
    /// large upload cannot hold the whole budget while other uploads wait.
    #[arg(long, env = env::UPLOAD_ADMIT_SHARE, default_value_t = ADMIT_SHARE,
          value_parser = parse_share)]
    pub upload_admit_share: f64,
    /// Bytes answers waiting to be written may hold in the supervisor at once, e.g. 64Mi, or
    /// `off`: each answer is reserved before it is read from its worker and held until written
    /// to the socket; past the budget it is dropped with 503 answer_budget_exhausted and
    /// Retry-After (one larger than the whole budget: 422 answer_too_large); while answers leave
    /// less than a sixteenth of it free, new requests get that 503 before their body is read.
    /// Default: the upload budget's derived size (room for one largest PDF).
    #[arg(long, env = env::ANSWER_BUDGET, value_parser = parse_answer_budget)]
    pub answer_budget: Option<AnswerBudget>,
    /// Bytes of documents sent with a digest (`Repr-Digest`, `Content-Digest`) the pod keeps, so
    /// that requests naming them by digest need not send them again, e.g. 64Mi; 0 turns this
    /// off. They stay in the upload budget, least recently used given back first as soon as an
    /// upload needs the room. Default: the upload budget's size.
    #[arg(long, env = env::DOCUMENT_CACHE_BYTES, value_parser = parse_memory_bytes)]
    pub document_cache_bytes: Option<u64>,
    /// Milliseconds a request head gets to arrive, counted from the connection being ready for
    /// one (so an idle keep-alive connection is closed after it too).
    #[arg(long, env = env::HEADER_READ_TIMEOUT_MS, default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub header_read_timeout_ms: u64,
    /// Milliseconds a write to a client may wait for the client to read before the connection
    /// is cut off (and the answer's memory freed).
    #[arg(long, env = env::WRITE_TIMEOUT_MS, default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub write_timeout_ms: u64,
    /// Bytes per second a client must average over a spell of writes that each waited for it
    /// to read, after the spell's first --write-timeout-ms, e.g. 32Ki; slower is cut off (and
    /// the answer's memory freed). A write that goes through whole at once ends the spell. 0
    /// asks for no rate.
    #[arg(long, env = env::WRITE_MIN_RATE, value_parser = parse_memory_bytes,
          default_value_t = 32 << 10)]
    pub write_min_rate: u64,
    /// Bytes per second a body must average after its first 2 s, e.g. 32Ki; slower is cut off
    /// with 408 body_too_slow.
    #[arg(long, env = env::BODY_MIN_RATE, value_parser = parse_memory_bytes,
          default_value_t = 32 << 10)]
    pub body_min_rate: u64,
    /// Milliseconds a body may go without a byte before it is cut off with 408 body_too_slow.
    #[arg(long, env = env::BODY_IDLE_TIMEOUT_MS, default_value_t = 5_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub body_idle_timeout_ms: u64,
    /// Enforce the upload budget, the body rate and idle limits, the header read and write
    /// timeouts and the write rate. `false` only for measuring what they cost.
    #[arg(long, env = env::FRONT_LIMITS, default_value_t = true,
          action = clap::ArgAction::Set)]
    pub front_limits: bool,
    /// Widest thumbnail, in pixels (`/v1/thumbnails?width=`).
    #[arg(long, env = env::THUMBNAIL_MAX_WIDTH, default_value_t = 1200)]
    pub thumbnail_max_width: u32,
    /// Highest thumbnail resolution (`/v1/thumbnails?dpi=`).
    #[arg(long, env = env::THUMBNAIL_MAX_DPI, default_value_t = 150.0)]
    pub thumbnail_max_dpi: f32,
    /// Most pixels of all pages of one JSON filmstrip (held whole until sent); past it the
    /// request is refused up front with 422 output_too_large. The NDJSON form is exempt.
    #[arg(long, env = env::THUMBNAIL_MAX_PIXELS, default_value_t = 16_000_000)]
    pub thumbnail_max_pixels: u64,
    /// Jobs after which a worker is replaced (plus up to 10% jitter).
    #[arg(long, env = env::RECYCLE_AFTER_JOBS, default_value_t = 500)]
    pub recycle_after_jobs: u64,
    /// Largest rendered page in pixels (width x height).
    #[arg(long, env = env::MAX_PIXELS, default_value_t = OpLimits::default().max_pixels)]
    pub max_pixels: u64,
    /// Most pages one request may name.
    #[arg(long, env = env::MAX_PAGES, default_value_t = OpLimits::default().max_pages)]
    pub max_pages: u32,
    /// Milliseconds a document is refused after it crashed a worker, or after its second
    /// conversion that timed out or crashed LibreOffice.
    #[arg(long, env = env::POISON_TTL_MS, default_value_t = 600_000)]
    pub poison_ttl_ms: u64,
    /// Milliseconds a running job whose client disconnected may still finish before its worker
    /// is killed and replaced.
    #[arg(long, env = env::CANCEL_GRACE_MS, default_value_t = 100)]
    pub cancel_grace_ms: u64,
    /// Scheduling niceness of worker processes (0 to 19); above 0 the HTTP front (health
    /// checks, admission, rejections) gets the CPU first when it wakes up.
    #[arg(long, env = env::WORKER_NICE, default_value_t = 10,
          value_parser = clap::value_parser!(i32).range(0..=19))]
    pub worker_nice: i32,
    /// Run each worker in a seccomp-bpf sandbox once PDFium is loaded (docs/sandbox.md): no
    /// files, no network, no new processes; a refused call ends the job as a crash. `false`
    /// only for measuring what it costs.
    #[arg(long, env = env::SANDBOX, default_value_t = true, action = clap::ArgAction::Set)]
    pub sandbox: bool,
    /// Every worker makes this forbidden call at each job (tests of the sandbox).
    #[arg(long, env = env::SANDBOX_PROBE, value_enum, hide = true)]
    pub sandbox_probe: Option<Probe>,
    /// Gotenberg's base URL for Office to PDF, e.g. http://pool-gotenberg:3000 (the operator
    /// sets it); without one, Office input is answered 503 office_not_configured.
    #[arg(long, env = env::GOTENBERG_URL)]
    pub gotenberg_url: Option<String>,
    /// Office conversions this pod runs at once when no share file is given, or until the share
    /// file is readable.
    #[arg(long, env = env::OFFICE_CONCURRENCY, default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub office_concurrency: u32,
    /// File holding this pod's share of the Gotenberg pool (one decimal number; the operator
    /// mounts it from a ConfigMap); re-read while running, a bad read keeps the last good share.
    #[arg(long, env = env::OFFICE_SHARE_FILE)]
    pub office_share_file: Option<PathBuf>,
    /// Milliseconds between reads of the share file.
    #[arg(long, env = env::OFFICE_SHARE_POLL_MS, default_value_t = 5_000,
          value_parser = clap::value_parser!(u64).range(10..))]
    pub office_share_poll_ms: u64,
    /// Office requests that may wait for a conversion place; beyond this they get 503 at once.
    #[arg(long, env = env::OFFICE_QUEUE_DEPTH, default_value_t = 32)]
    pub office_queue_depth: usize,
    /// Converted-PDF bytes kept in memory (least recently used out first), e.g. 64Mi; 0 turns
    /// the cache off. Counts against the supervisor's memory, not a slot's.
    #[arg(long, env = env::OFFICE_CACHE_BYTES, value_parser = parse_memory_bytes,
          default_value_t = pod::OFFICE_CACHE.bytes())]
    pub office_cache_bytes: u64,
    /// Most bytes an Office package's parts may declare together in its ZIP directory, e.g.
    /// 1Gi; more is answered 413 office_inflated_too_large before Gotenberg sees it.
    #[arg(long, env = env::OFFICE_MAX_INFLATED_BYTES, value_parser = parse_memory_bytes,
          default_value = "1Gi")]
    pub office_max_inflated_bytes: u64,
    /// Most bytes one part of an Office package may declare, e.g. 512Mi; more is answered 413
    /// office_inflated_too_large.
    #[arg(long, env = env::OFFICE_MAX_PART_BYTES, value_parser = parse_memory_bytes,
          default_value = "512Mi")]
    pub office_max_part_bytes: u64,
    /// Highest ratio of declared uncompressed to compressed bytes of one part of an Office
    /// package (parts above 1 MiB); more is answered 422 office_inflate_bomb.
    #[arg(long, env = env::OFFICE_MAX_COMPRESSION_RATIO, default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub office_max_compression_ratio: u64,
    /// File holding the token every /v1/* request must present as `Authorization: Bearer
    /// <token>` (401 unauthorized otherwise; surrounding whitespace is not part of it). Read
    /// again at most every second, so a rotated Secret takes effect without a restart. Without
    /// it the document routes answer whoever reaches the pod; /healthz, /readyz, /metrics and
    /// /openapi.json never ask for a token.
    #[arg(long, env = env::AUTH_TOKEN_FILE)]
    pub auth_token_file: Option<PathBuf>,
    /// Log format.
    #[arg(long, env = env::LOG_FORMAT, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Executable started as `<exe> worker` for each slot (default: this binary).
    #[arg(long, env = env::WORKER_EXE, hide = true)]
    pub worker_exe: Option<PathBuf>,
    /// Durable jobs and object storage.
    #[command(flatten)]
    pub jobs: jobs::JobsArgs,
}

impl ServeArgs {
    /// The per-job limits workers enforce.
    pub fn op_limits(&self) -> OpLimits {
        OpLimits { max_pixels: self.max_pixels, max_pages: self.max_pages }
    }

    /// Job deadline.
    pub fn job_deadline(&self) -> Duration {
        Duration::from_millis(self.job_deadline_ms)
    }

    /// How the Office path runs; a converted PDF is held to the same limit as an uploaded one.
    pub fn office(&self) -> OfficeConfig {
        OfficeConfig {
            gotenberg_url: self.gotenberg_url.clone().filter(|url| !url.trim().is_empty()),
            share: self.office_concurrency,
            share_file: self.office_share_file.clone(),
            share_poll: Duration::from_millis(self.office_share_poll_ms),
            max_waiting: self.office_queue_depth,
            cache_bytes: self.office_cache_bytes,
            max_pdf_bytes: self.max_body_bytes,
            inflation: InflationLimits {
                max_inflated_bytes: self.office_max_inflated_bytes,
                max_part_bytes: self.office_max_part_bytes,
                max_ratio: self.office_max_compression_ratio,
            },
        }
    }

    /// The supervisor's share of the pod's memory: `--supervisor-overhead`, or what the body
    /// limit and the Office cache need (the operator sizes pods with the same function).
    pub fn supervisor_overhead(&self) -> u64 {
        self.supervisor_overhead
            .unwrap_or_else(|| supervisor_share(self.max_body_bytes, self.office_cache_bytes))
    }

    /// The front's byte budget for request bodies: `--upload-budget`, or derived from the
    /// supervisor's share; unlimited with `--front-limits false`.
    pub fn upload_budget(&self) -> Result<u64, UploadBudgetError> {
        if !self.front_limits {
            return Ok(u64::MAX);
        }
        match self.upload_budget {
            Some(0) => Err(UploadBudgetError::Zero),
            Some(budget) => Ok(budget),
            None => self.derived_budget(),
        }
    }

    /// The byte budget for answers waiting to be written: `--answer-budget`, or the size the
    /// upload budget is derived to (one largest body's worth: the largest PDF answer); no limit
    /// with `--answer-budget off`.
    pub fn answer_budget(&self) -> Result<u64, UploadBudgetError> {
        match self.answer_budget {
            Some(AnswerBudget::Off) => Ok(u64::MAX),
            Some(AnswerBudget::Bytes(budget)) => Ok(budget),
            None => self.derived_budget(),
        }
    }

    /// The default size of each byte budget: an equal part of what the supervisor's share
    /// leaves after its rest and the Office cache (the operator sizes that share to hold both).
    fn derived_budget(&self) -> Result<u64, UploadBudgetError> {
        byte_budget(self.supervisor_overhead(), self.office_cache_bytes).ok_or(
            UploadBudgetError::NothingLeft {
                supervisor_overhead: self.supervisor_overhead(),
                office_cache_bytes: self.office_cache_bytes,
            },
        )
    }

    /// Bytes of documents kept by digest: `--document-cache-bytes`, by default the upload
    /// budget's size as set or derived (also with `--front-limits false`, whose budget has no
    /// size), never more than `upload_budget`.
    pub fn document_cache_bytes(&self, upload_budget: u64) -> u64 {
        let sized = || self.upload_budget.or_else(|| self.derived_budget().ok()).unwrap_or(0);
        self.document_cache_bytes.unwrap_or_else(sized).min(upload_budget)
    }

    /// How bodies must arrive: at most the budget (a body that can never fit is 413, not a 503
    /// to retry forever), and within the rate and idle limits unless they are switched off.
    pub fn body_limits(&self, upload_budget: u64) -> BodyLimits {
        BodyLimits {
            max_bytes: self.max_body_bytes.min(upload_budget),
            admit_bytes: admit_bytes(upload_budget, self.upload_admit_share),
            min_rate: self.front_limits.then_some(self.body_min_rate).filter(|r| *r > 0),
            idle: self.front_limits.then(|| Duration::from_millis(self.body_idle_timeout_ms)),
        }
    }

    /// How connections are held.
    pub fn connection_limits(&self) -> ConnectionLimits {
        ConnectionLimits {
            header_read_timeout: self
                .front_limits
                .then(|| Duration::from_millis(self.header_read_timeout_ms)),
            write_timeout: self.front_limits.then(|| Duration::from_millis(self.write_timeout_ms)),
            write_min_rate: self.front_limits.then_some(self.write_min_rate).filter(|r| *r > 0),
        }
    }

    /// Caps on filmstrips.
    pub fn thumbnail_limits(&self) -> ThumbnailLimits {
        ThumbnailLimits {
            max_width: self.thumbnail_max_width,
            max_dpi: self.thumbnail_max_dpi,
            max_pixels: self.thumbnail_max_pixels,
        }
    }

    /// A warning when `--max-body-bytes` is more than the upload budget can hold.
    pub fn body_budget_warning(&self, upload_budget: u64) -> Option<String> {
        (self.max_body_bytes > upload_budget).then(|| {
            format!(
                "--max-body-bytes {} MiB is more than the upload budget of {} MiB: larger bodies \
                 get 413; raise --supervisor-overhead (or --upload-budget) to accept them",
                self.max_body_bytes >> 20,
                upload_budget >> 20
            )
        })
    }

    /// Each worker's hard memory ceiling, unless switched off.
    pub fn memory_ceiling(&self) -> Option<u64> {
        self.memory_ceiling.then_some(self.memory_per_slot)
    }

    /// Resident memory after a job above which a worker is replaced: half its budget, so slow
    /// growth (heap fragmentation, PDFium's caches) is shed long before the ceiling is near.
    pub fn recycle_rss(&self) -> u64 {
        self.memory_per_slot / 2
    }

    /// A warning when the ceiling cannot hold the largest render `--max-pixels` allows: its
    /// bitmap (4 bytes a pixel) and as much again for PDFium's scratch bitmaps and the encoder
    /// (measured: 191-218 MB at the peak for 38-40 megapixel pages of the corpus). Renders past
    /// that fail with `memory_limit_exceeded` for what the request asked, not for the document.
    pub fn ceiling_warning(&self) -> Option<String> {
        let ceiling = self.memory_ceiling()?;
        let needed = self.max_pixels.saturating_mul(2 * 4);
        (needed > ceiling).then(|| {
            format!(
                "--memory-per-slot {} MiB cannot hold a render of --max-pixels {} (about {} MiB): \
                 raise the one or lower the other",
                ceiling >> 20,
                self.max_pixels,
                needed >> 20
            )
        })
    }
}

/// A fraction above 0 and at most 1.
fn parse_share(value: &str) -> Result<f64, String> {
    let share: f64 = value.trim().parse().map_err(|e| format!("{value:?}: {e}"))?;
    if share > 0.0 && share <= 1.0 {
        Ok(share)
    } else {
        Err(format!("{value:?} is not a fraction above 0 and at most 1"))
    }
}

/// `--answer-budget`: a size, or no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerBudget {
    /// At most this many bytes.
    Bytes(u64),
    /// No limit (only for measuring what the budget costs).
    Off,
}

/// A size above 0 (`64Mi`), or `off`.
fn parse_answer_budget(value: &str) -> Result<AnswerBudget, String> {
    if value.trim().eq_ignore_ascii_case("off") {
        return Ok(AnswerBudget::Off);
    }
    match parse_memory_bytes(value).map_err(|e| e.to_string())? {
        0 => Err("an answer budget of 0 would refuse every answer (`off` lifts it)".into()),
        bytes => Ok(AnswerBudget::Bytes(bytes)),
    }
}

/// Why no upload budget can be derived.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UploadBudgetError {
    /// The supervisor's share leaves nothing for uploads.
    #[error(
        "--supervisor-overhead {} MiB leaves no upload or answer budget after {} MiB for the supervisor at rest and --office-cache-bytes {} MiB: raise the one, lower the other, or set --upload-budget and --answer-budget",
        supervisor_overhead >> 20,
        SUPERVISOR_AT_REST >> 20,
        office_cache_bytes >> 20
    )]
    NothingLeft { supervisor_overhead: u64, office_cache_bytes: u64 },
    /// `--upload-budget 0` would refuse every document.
    #[error("--upload-budget 0 would refuse every document")]
    Zero,
}

/// Flags of the hidden `render-pod worker` subcommand (set by the supervisor; the worker's
/// environment is empty, so everything it needs is here).
#[derive(Debug, Clone, clap::Args)]
pub struct WorkerArgs {
    /// Largest rendered page in pixels.
    #[arg(long)]
    pub max_pixels: u64,
    /// Most pages one job may touch.
    #[arg(long)]
    pub max_pages: u32,
    /// The libpdfium.so to load.
    #[arg(long)]
    pub pdfium: PathBuf,
    /// Enter the sandbox once PDFium is loaded.
    #[arg(long)]
    pub sandbox: bool,
    /// A forbidden call to make at each job.
    #[arg(long, value_enum)]
    pub sandbox_probe: Option<Probe>,
}

impl WorkerArgs {
    /// The arguments that start a worker with `options`.
    pub fn command_line(options: &WorkerOptions) -> Vec<std::ffi::OsString> {
        let mut args: Vec<std::ffi::OsString> = vec![
            "worker".into(),
            "--max-pixels".into(),
            options.limits.max_pixels.to_string().into(),
            "--max-pages".into(),
            options.limits.max_pages.to_string().into(),
            "--pdfium".into(),
            options.pdfium.clone().into(),
        ];
        if options.sandbox {
            args.push("--sandbox".into());
        }
        if let Some(probe) = options.probe.and_then(|p| clap::ValueEnum::to_possible_value(&p)) {
            args.extend(["--sandbox-probe".into(), probe.get_name().into()]);
        }
        args
    }

    /// What these flags say.
    pub fn options(&self) -> WorkerOptions {
        WorkerOptions {
            limits: OpLimits { max_pixels: self.max_pixels, max_pages: self.max_pages },
            pdfium: self.pdfium.clone(),
            sandbox: self.sandbox,
            probe: self.sandbox_probe,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn serve(flags: &[&str]) -> ServeArgs {
        Cli::try_parse_from(std::iter::once("serve").chain(flags.iter().copied())).unwrap().serve
    }

    #[test]
    fn the_ceiling_and_the_recycle_threshold_follow_the_memory_per_slot() {
        let args = serve(&["--memory-per-slot", "512Mi"]);
        assert_eq!(args.memory_ceiling(), Some(512 << 20));
        assert_eq!(args.recycle_rss(), 256 << 20);
        // The defaults hold the largest render: 40 megapixels need about 305 MiB.
        assert_eq!(args.ceiling_warning(), None);
        let off = serve(&["--memory-per-slot", "512Mi", "--memory-ceiling", "false"]);
        assert_eq!((off.memory_ceiling(), off.ceiling_warning()), (None, None));
    }

    #[test]
    fn the_upload_budget_is_half_of_what_the_supervisors_share_leaves() {
        let mib = 1u64 << 20;
        // The default share holds a largest upload and a largest answer: 296 MiB = 32 + 64
        // (cache) + 2 x 100 (body).
        let defaults = serve(&[]);
        assert_eq!(defaults.supervisor_overhead(), 296 * mib);
        assert_eq!(defaults.upload_budget().unwrap(), 100 * mib);
        assert_eq!(defaults.body_budget_warning(100 * mib), None);
        // A share set too small for the body limit: 413 past the budget, and a warning.
        let tight = serve(&["--supervisor-overhead", "128Mi"]);
        assert_eq!(tight.upload_budget().unwrap(), 16 * mib);
        assert_eq!(tight.body_limits(16 * mib).max_bytes, 16 * mib);
        assert!(tight.body_budget_warning(16 * mib).unwrap().contains("--supervisor-overhead"));
        let roomy = serve(&["--supervisor-overhead", "512Mi", "--office-cache-bytes", "0"]);
        assert_eq!(roomy.upload_budget().unwrap(), 240 * mib);
        assert_eq!(roomy.body_limits(240 * mib).max_bytes, 100 * mib);
        assert_eq!(roomy.body_budget_warning(240 * mib), None);
        assert_eq!(serve(&["--upload-budget", "8Mi"]).upload_budget().unwrap(), 8 * mib);
        let none_left = serve(&["--supervisor-overhead", "64Mi"]).upload_budget().unwrap_err();
        assert!(matches!(none_left, UploadBudgetError::NothingLeft { .. }));
        assert!(none_left.to_string().contains("after 32 MiB"), "{none_left}");
        assert_eq!(serve(&["--upload-budget", "0"]).upload_budget(), Err(UploadBudgetError::Zero));
    }

    #[test]
    fn one_body_is_admitted_with_a_share_of_the_budget() {
        let mib = 1u64 << 20;
        assert_eq!(serve(&[]).body_limits(100 * mib).admit_bytes, 25 * mib);
        let half = serve(&["--upload-admit-share", "0.5"]);
        assert_eq!(half.body_limits(32 * mib).admit_bytes, 16 * mib);
        for bad in ["0", "-0.1", "1.5", "NaN", "half"] {
            let parsed = Cli::try_parse_from(["serve", "--upload-admit-share", bad]);
            assert!(parsed.is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn front_limits_false_lifts_the_budget_and_the_timeouts_only() {
        let off = serve(&["--front-limits", "false"]);
        assert_eq!(off.upload_budget().unwrap(), u64::MAX);
        let limits = off.body_limits(u64::MAX);
        assert_eq!((limits.max_bytes, limits.min_rate, limits.idle), (100 << 20, None, None));
        assert_eq!(off.connection_limits().header_read_timeout, None);
        let on = serve(&[]);
        assert_eq!(on.connection_limits().header_read_timeout, Some(Duration::from_secs(10)));
        assert_eq!(on.body_limits(1 << 30).min_rate, Some(32 << 10));
    }

    #[test]
    fn the_answer_budget_defaults_to_the_upload_budgets_size_and_can_be_set_or_lifted() {
        let mib = 1u64 << 20;
        assert_eq!(serve(&[]).answer_budget().unwrap(), 100 * mib);
        let tight = serve(&["--supervisor-overhead", "128Mi"]);
        assert_eq!(tight.answer_budget().unwrap(), 16 * mib);
        assert_eq!(serve(&["--answer-budget", "8Mi"]).answer_budget().unwrap(), 8 * mib);
        assert_eq!(serve(&["--answer-budget", "off"]).answer_budget().unwrap(), u64::MAX);
        assert!(Cli::try_parse_from(["serve", "--answer-budget", "0"]).is_err());
        assert!(Cli::try_parse_from(["serve", "--answer-budget", "lots"]).is_err());
        // The write timeout is on by default and goes with the other front limits.
        let on = serve(&["--write-timeout-ms", "1500"]);
        assert_eq!(on.connection_limits().write_timeout, Some(Duration::from_millis(1500)));
        assert_eq!(serve(&["--front-limits", "false"]).connection_limits().write_timeout, None);
        // So is the write rate floor.
        assert_eq!(on.connection_limits().write_min_rate, Some(32 << 10));
        let none = serve(&["--write-min-rate", "0"]).connection_limits();
        assert_eq!((none.write_min_rate, none.write_timeout.is_some()), (None, true));
        assert_eq!(serve(&["--front-limits", "false"]).connection_limits().write_min_rate, None);
    }

    #[test]
    fn the_document_cache_defaults_to_the_upload_budgets_size_and_stays_within_the_budget() {
        let mib = 1u64 << 20;
        assert_eq!(serve(&[]).document_cache_bytes(100 * mib), 100 * mib);
        assert_eq!(serve(&["--upload-budget", "40Mi"]).document_cache_bytes(40 * mib), 40 * mib);
        // Without front limits the budget is unbounded; the cache still has the derived size.
        assert_eq!(serve(&["--front-limits", "false"]).document_cache_bytes(u64::MAX), 100 * mib);
        let set = serve(&["--document-cache-bytes", "8Mi"]);
        assert_eq!(set.document_cache_bytes(100 * mib), 8 * mib);
        assert_eq!(set.document_cache_bytes(4 * mib), 4 * mib, "never past the upload budget");
        assert_eq!(serve(&["--document-cache-bytes", "0"]).document_cache_bytes(100 * mib), 0);
    }

    #[test]
    fn the_worker_reads_back_what_the_supervisor_writes() {
        #[derive(Parser)]
        struct Worker {
            #[command(flatten)]
            worker: WorkerArgs,
        }
        let on = serve(&["--max-pages", "7", "--sandbox-probe", "process-vm-readv"]);
        assert!(on.sandbox, "on by default");
        let written = WorkerOptions {
            limits: on.op_limits(),
            pdfium: "/opt/lib/libpdfium.so".into(),
            sandbox: on.sandbox,
            probe: on.sandbox_probe,
        };
        // The first argument is the subcommand's name, where the parser expects the program's.
        let line = WorkerArgs::command_line(&written);
        let read = Worker::try_parse_from(line).unwrap().worker.options();
        assert_eq!(read.limits.max_pages, 7);
        assert_eq!(read.pdfium, written.pdfium);
        assert_eq!((read.sandbox, read.probe), (true, Some(Probe::ProcessVmReadv)));
        let off = serve(&["--sandbox", "false"]);
        let line = WorkerArgs::command_line(&WorkerOptions {
            sandbox: off.sandbox,
            probe: None,
            ..written
        });
        assert!(!line.iter().any(|a| a.to_str().is_some_and(|a| a.starts_with("--sandbox"))));
    }

    #[test]
    fn a_ceiling_too_small_for_the_largest_render_is_named() {
        let warning = serve(&["--memory-per-slot", "256Mi"]).ceiling_warning().unwrap();
        assert!(warning.contains("256 MiB") && warning.contains("40000000"), "{warning}");
        assert_eq!(
            serve(&["--memory-per-slot", "256Mi", "--max-pixels", "20000000"]).ceiling_warning(),
            None
        );
    }
}
