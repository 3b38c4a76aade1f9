//! Office to PDF: detection from the bytes, the weight a package declares, admission within
//! this pod's share of the Gotenberg pool, the Gotenberg client and a cache of converted PDFs.
//! A conversion that times out or fails in LibreOffice is a strike against its document in the
//! quarantine PDFium's crashes use (a second strike quarantines it). The HTTP layer calls
//! [`Office`]; nothing here knows about HTTP requests or PDFium slots.

mod admission;
mod cache;
pub mod detect;
mod error;
pub mod gotenberg;
mod metrics;
mod options;
pub mod share;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared, WeakShared};
use serde::Serialize;

use renderpool_runtime::pacing::{MovingAverage, retry_after_secs};

use crate::metrics::count;
use crate::ops::DocHash;
use crate::quarantine::{PoisonList, WorkClass};

pub use admission::{Admission, AdmissionStatus, Permit, Refused};
pub use cache::{CacheKey, CacheStatus, PdfCache};
pub use detect::inflation::InflationLimits;
pub use detect::{Detected, OfficeFormat, Refusal, detect};
pub use error::ConvertError;
pub use gotenberg::{GotenbergClient, UrlError};
pub use metrics::OfficeMetrics;
pub use options::{ConvertOptions, PdfA, UnknownPdfA};

/// A converted PDF and its hash (the worker cache and the poison list key on it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Converted {
    /// The PDF.
    pub pdf: Bytes,
    /// Its hash.
    pub hash: DocHash,
}

/// How the Office path runs.
#[derive(Debug, Clone)]
pub struct OfficeConfig {
    /// Gotenberg's base URL; `None` refuses Office input with 503.
    pub gotenberg_url: Option<String>,
    /// Conversions this pod may run at once, until a share file says otherwise.
    pub share: u32,
    /// The operator's share file, re-read every `share_poll`.
    pub share_file: Option<PathBuf>,
    /// How often the share file is re-read.
    pub share_poll: Duration,
    /// Requests that may wait for a place; more are refused at once.
    pub max_waiting: usize,
    /// Converted-PDF bytes kept.
    pub cache_bytes: u64,
    /// Largest converted PDF accepted.
    pub max_pdf_bytes: u64,
    /// What a package may declare it inflates to.
    pub inflation: InflationLimits,
}

/// `/readyz`'s view of the Office path (readiness never depends on it).
#[derive(Debug, Clone, Serialize)]
pub struct OfficeStatus {
    /// A Gotenberg URL is configured.
    pub configured: bool,
    /// Where conversions go.
    pub gotenberg_url: Option<String>,
    /// The share file, when the operator gives one.
    pub share_file: Option<PathBuf>,
    /// Admission figures.
    pub admission: AdmissionStatus,
    /// Cache figures.
    pub cache: CacheStatus,
}

type SharedConversion = Shared<BoxFuture<'static, Result<Converted, ConvertError>>>;
type WeakConversion = WeakShared<BoxFuture<'static, Result<Converted, ConvertError>>>;

/// The Office path.
pub struct Office {
    config: OfficeConfig,
    client: Option<GotenbergClient>,
    admission: Arc<Admission>,
    cache: PdfCache,
    /// Conversions under way, so concurrent requests for one upload share one. Weak: when every
    /// request waiting on a conversion is gone, the conversion is dropped, which cancels it.
    in_progress: Mutex<HashMap<CacheKey, (u64, WeakConversion)>>,
    /// Numbers conversions, so one only ever unlists itself.
    conversions_started: AtomicU64,
    average_conversion: MovingAverage,
    metrics: Arc<OfficeMetrics>,
    job_deadline: Duration,
    /// Where a conversion that stalled or crashed LibreOffice strikes its document.
    poison: Arc<PoisonList>,
}

impl Office {
    /// Builds the Office path, striking documents in `poison`; a bad Gotenberg URL is an error
    /// at start, not per request.
    pub fn new(
        config: OfficeConfig,
        job_deadline: Duration,
        metrics: Arc<OfficeMetrics>,
        poison: Arc<PoisonList>,
    ) -> Result<Arc<Self>, UrlError> {
        let client = config
            .gotenberg_url
            .as_deref()
            .map(|url| GotenbergClient::new(url, config.max_pdf_bytes, metrics.clone()))
            .transpose()?;
        let share = match &config.share_file {
            Some(path) => match share::read(path) {
                Ok(share) => share,
                Err(e) => {
                    tracing::warn!(error = %e, share = config.share, "using --office-concurrency until the share file is readable");
                    config.share
                }
            },
            None => config.share,
        };
        metrics.share.set(i64::from(share));
        Ok(Arc::new(Self {
            admission: Admission::new(share, config.max_waiting),
            cache: PdfCache::new(config.cache_bytes),
            client,
            config,
            in_progress: Mutex::new(HashMap::new()),
            conversions_started: AtomicU64::new(0),
            average_conversion: MovingAverage::default(),
            metrics,
            job_deadline,
            poison,
        }))
    }

    /// Starts re-reading the share file, if there is one; abort the task to stop.
    pub fn watch_share(&self) -> Option<tokio::task::JoinHandle<()>> {
        let path = self.config.share_file.clone()?;
        Some(share::watch(
            path,
            self.admission.clone(),
            self.metrics.clone(),
            self.config.share_poll,
        ))
    }

    /// What `/readyz` shows.
    pub fn status(&self) -> OfficeStatus {
        OfficeStatus {
            configured: self.client.is_some(),
            gotenberg_url: self.config.gotenberg_url.clone(),
            share_file: self.config.share_file.clone(),
            admission: self.admission.status(),
            cache: self.cache.status(),
        }
    }

    /// The PDF of `upload` (an Office document of `format` whose hash is `hash`): from the
    /// cache, from a conversion of the same upload already under way, or converted now within
    /// this pod's share. A package that declares it inflates past the limits is refused first.
    /// Dropping the future gives up its interest; the conversion is cancelled once nobody waits
    /// for it any more.
    pub async fn to_pdf(
        self: &Arc<Self>,
        upload: &Bytes,
        hash: DocHash,
        format: OfficeFormat,
        options: ConvertOptions,
        deadline: Instant,
    ) -> Result<Converted, ConvertError> {
        if self.client.is_none() {
            count(&self.metrics.conversions, "result", ConvertError::NotConfigured.code());
            return Err(ConvertError::NotConfigured);
        }
        if let Err(refused) = detect::inflation::check(upload, &self.config.inflation) {
            let refused = ConvertError::Inflation(refused);
            count(&self.metrics.conversions, "result", refused.code());
            return Err(refused);
        }
        let key = CacheKey { upload: hash, options };
        if let Some(hit) = self.cache.get(&key) {
            count(&self.metrics.cache_lookups, "result", "hit");
            return Ok(hit);
        }
        let conversion = self.join_or_start(&key, upload, format, deadline);
        conversion.await
    }

    fn join_or_start(
        self: &Arc<Self>,
        key: &CacheKey,
        upload: &Bytes,
        format: OfficeFormat,
        deadline: Instant,
    ) -> SharedConversion {
        let mut in_progress = self.in_progress.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(running) = in_progress.get(key).and_then(|(_, weak)| weak.upgrade()) {
            count(&self.metrics.cache_lookups, "result", "shared");
            return running;
        }
        count(&self.metrics.cache_lookups, "result", "miss");
        let id = self.conversions_started.fetch_add(1, Ordering::Relaxed);
        let conversion = self
            .clone()
            .convert(id, key.clone(), upload.clone(), format, deadline)
            .boxed()
            .shared();
        if let Some(weak) = conversion.downgrade() {
            in_progress.insert(key.clone(), (id, weak));
        }
        conversion
    }

    /// One conversion: a place, Gotenberg, the hash, the cache.
    async fn convert(
        self: Arc<Self>,
        id: u64,
        key: CacheKey,
        upload: Bytes,
        format: OfficeFormat,
        deadline: Instant,
    ) -> Result<Converted, ConvertError> {
        let _listed = InProgress { office: &self, key: &key, id };
        let result = self.convert_within_share(&key, &upload, format, deadline).await;
        let code = match &result {
            Ok(_) => "ok",
            Err(e) => e.code(),
        };
        count(&self.metrics.conversions, "result", code);
        if let Err(e) = &result {
            self.strike(&key.upload, e);
        }
        let converted = result?;
        self.cache.insert(key.clone(), converted.clone());
        let cache = self.cache.status();
        self.metrics.cache_bytes.set(i64::try_from(cache.bytes).unwrap_or(i64::MAX));
        self.metrics.cache_entries.set(i64::try_from(cache.entries).unwrap_or(i64::MAX));
        Ok(converted)
    }

    async fn convert_within_share(
        &self,
        key: &CacheKey,
        upload: &Bytes,
        format: OfficeFormat,
        deadline: Instant,
    ) -> Result<Converted, ConvertError> {
        let client = self.client.as_ref().ok_or(ConvertError::NotConfigured)?;
        let asked = Instant::now();
        let permit = {
            let _waiting = GaugeGuard::new(&self.metrics.waiting);
            self.admission.acquire(deadline).await
        };
        let permit = permit.map_err(|refused| self.refused(refused))?;
        self.metrics.wait.observe(asked.elapsed().as_secs_f64());
        let started = Instant::now();
        let pdf = {
            let _running = GaugeGuard::new(&self.metrics.in_flight);
            client.convert(upload, format, &key.options, deadline).await
        };
        drop(permit);
        let took = started.elapsed();
        self.metrics.conversion.observe(took.as_secs_f64());
        let pdf = pdf.map_err(|e| e.with_retry_after(self.retry_after()))?;
        self.average_conversion.record(took);
        let hash = DocHash::of_shared(&pdf).await.map_err(|e| ConvertError::Upstream {
            status: 200,
            message: format!("hashing the PDF failed: {e}"),
        })?;
        Ok(Converted { pdf, hash })
    }

    /// Counts a strike against `upload` when LibreOffice ran out of time on it or failed on it
    /// (Gotenberg's 500: a crash or exhausted resources, by its own message): the engine's rule
    /// for a death whose cause cannot be shown, since a conversion may also have waited behind
    /// another inside Gotenberg. The second within the TTL quarantines it for all work.
    fn strike(&self, upload: &DocHash, error: &ConvertError) {
        if !matches!(error, ConvertError::Timeout { .. } | ConvertError::Failed { .. }) {
            return;
        }
        let quarantined = self.poison.strike(*upload, WorkClass::Open, Instant::now());
        count(&self.metrics.strikes, "quarantined", if quarantined { "true" } else { "false" });
        let document = blake3::Hash::from(upload.0).to_hex();
        tracing::warn!(%document, %error, quarantined, "Office conversion struck its document");
    }

    /// Seconds a refused client should wait: the waiters ahead worked off at the average
    /// conversion time over the share.
    fn retry_after(&self) -> u64 {
        let status = self.admission.status();
        retry_after_secs(status.waiting, status.share, self.average_conversion.get())
    }

    fn refused(&self, refused: Refused) -> ConvertError {
        let status = self.admission.status();
        let retry_after_secs = self.retry_after();
        match refused {
            Refused::Full => ConvertError::QueueFull {
                share: status.share,
                waiting: status.waiting,
                retry_after_secs,
            },
            Refused::Timeout => ConvertError::WaitTimeout {
                deadline_ms: u64::try_from(self.job_deadline.as_millis()).unwrap_or(u64::MAX),
                retry_after_secs,
            },
        }
    }
}

/// Unlists a conversion when it ends or is dropped, so a later request never joins a finished
/// (perhaps failed) one.
struct InProgress<'a> {
    office: &'a Office,
    key: &'a CacheKey,
    id: u64,
}

impl Drop for InProgress<'_> {
    fn drop(&mut self) {
        let mut in_progress = self.office.in_progress.lock().unwrap_or_else(|p| p.into_inner());
        // A newer conversion of the same key may have replaced this one.
        if in_progress.get(self.key).is_some_and(|(id, _)| *id == self.id) {
            in_progress.remove(self.key);
        }
    }
}

/// Raises a gauge while alive.
struct GaugeGuard<'a>(&'a prometheus_client::metrics::gauge::Gauge);

impl<'a> GaugeGuard<'a> {
    fn new(gauge: &'a prometheus_client::metrics::gauge::Gauge) -> Self {
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for GaugeGuard<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}
