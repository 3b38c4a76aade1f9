//! `render-pod serve`: size the slots, start the engine and the HTTP front, drain on SIGTERM.

use std::sync::Arc;
use std::time::Duration;

use renderpool_runtime::listen;
use renderpool_sizing::{SizingError, SlotPolicy, plan_slots};

use crate::broker::{Backlog, Broker, BrokerError, backlog};
use crate::byte_budget::ByteBudget;
use crate::config::jobs::JobsConfigError;
use crate::config::{ServeArgs, UploadBudgetError, WorkerArgs};
use crate::doc_cache::DocCache;
use crate::drain::{self, Lifecycle};
use crate::engine::worker::WorkerOptions;
use crate::engine::{self, Confinement, Engine, EngineConfig, EngineMetrics, WorkerCommand};
use crate::http::auth::{BearerToken, TokenError};
use crate::http::etag::EngineVersion;
use crate::http::jobs::JobsFront;
use crate::http::{self, AppState, FrontMetrics, PlanView, Uploads};
use crate::jobs::{JobLimits, Jobs, JobsConfig, JobsMetrics};
use crate::limits::{self, PlanMetrics};
use crate::metrics::{Exposition, Rejections};
use crate::objects::Objects;
use crate::office::{Office, OfficeMetrics, UrlError};
use crate::outbound;
use crate::pdfium_lib::{self, PdfiumLoadError};
use crate::quarantine::{self, PoisonList};

/// Why the service could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The limits cannot hold one slot, or the flags make no sense.
    #[error("cannot size the slots: {0}")]
    Sizing(#[from] SizingError),
    /// The path of this binary (to start workers) is unknown.
    #[error("cannot find this executable to start workers: {0}")]
    CurrentExe(std::io::Error),
    /// No upload budget can be had from the flags.
    #[error(transparent)]
    UploadBudget(#[from] UploadBudgetError),
    /// The worker binary or PDFium could not be read to version the answers' ETags.
    #[error("cannot read the worker binary or libpdfium to version the answers: {0}")]
    EngineVersion(std::io::Error),
    /// Binding the listen address failed.
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: std::net::SocketAddr, source: std::io::Error },
    /// The HTTP server failed.
    #[error("server: {0}")]
    Server(std::io::Error),
    /// libpdfium is missing: no worker could ever start.
    #[error(transparent)]
    Pdfium(#[from] PdfiumLoadError),
    /// The Gotenberg URL is not usable.
    #[error(transparent)]
    Office(#[from] UrlError),
    /// The auth token file cannot be used.
    #[error(transparent)]
    Auth(#[from] TokenError),
    /// Signal handlers could not be installed.
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
    /// The job or object store flags cannot be used.
    #[error(transparent)]
    Jobs(#[from] JobsConfigError),
    /// The job broker cannot be reached or set up.
    #[error("durable jobs: {0}")]
    Broker(#[from] BrokerError),
}

/// Runs the service until SIGTERM/SIGINT and a completed drain.
pub async fn run(args: ServeArgs) -> Result<(), ServeError> {
    let mut signals = drain::Signals::install().map_err(ServeError::Signals)?;
    // Workers bind PDFium themselves; failing here gives a newcomer the fix in one line instead
    // of a slot that keeps failing to start.
    let pdfium = pdfium_lib::library_path();
    if !pdfium.is_file() {
        return Err(PdfiumLoadError::Missing(pdfium).into());
    }
    let detected = limits::detect();
    let policy = SlotPolicy {
        memory_per_slot: args.memory_per_slot,
        supervisor_overhead: args.supervisor_overhead(),
        override_slots: args.slots,
    };
    let plan = plan_slots(detected.limits(), policy)?;
    let upload_budget = args.upload_budget()?;
    let answer_budget = args.answer_budget()?;
    tracing::info!(
        slots = plan.slots,
        cpu_slots = plan.cpu_slots,
        memory_slots = plan.memory_slots,
        overridden = plan.overridden,
        reason = %plan.reason,
        cpu = %detected.cpu_source,
        memory = %detected.memory_source,
        "slot plan"
    );
    engine::spare_supervisor();
    for warning in
        [args.ceiling_warning(), args.body_budget_warning(upload_budget)].into_iter().flatten()
    {
        tracing::warn!("{warning}");
    }
    // Each subsystem's metrics, registered into one exposition; refusals are counted by the
    // front and the engine alike.
    let rejections = Rejections::default();
    let engine_metrics = Arc::new(EngineMetrics::new(rejections.clone()));
    let front_metrics = Arc::new(FrontMetrics::new(rejections.clone()));
    let office_metrics = Arc::new(OfficeMetrics::default());
    let jobs_metrics = Arc::new(JobsMetrics::default());
    let mut exposition = Exposition::new();
    exposition.add(&*engine_metrics);
    exposition.add(&rejections);
    exposition.add(&*front_metrics);
    exposition.add(&*office_metrics);
    exposition.add(&*jobs_metrics);
    exposition.add(&PlanMetrics { plan: &plan, limits: &detected });
    front_metrics.upload_budget.set(i64::try_from(upload_budget).unwrap_or(i64::MAX));
    front_metrics.answer_budget.set(i64::try_from(answer_budget).unwrap_or(i64::MAX));
    let answers = ByteBudget::new(answer_budget, front_metrics.answer_reserved.clone());
    let uploads = Uploads {
        budget: ByteBudget::new(upload_budget, front_metrics.upload_reserved.clone()),
        limits: args.body_limits(upload_budget),
    };
    let documents = DocCache::new(args.document_cache_bytes(upload_budget), uploads.budget.clone());
    exposition.add(documents.metrics());
    tracing::info!(
        upload_budget = upload_budget,
        max_body_bytes = uploads.limits.max_bytes,
        admit_bytes = uploads.limits.admit_bytes,
        body_min_rate = ?uploads.limits.min_rate,
        answer_budget = answer_budget,
        document_cache_bytes = documents.status().budget,
        header_read_timeout_ms = ?args.connection_limits().header_read_timeout.map(|t| t.as_millis()),
        write_timeout_ms = ?args.connection_limits().write_timeout.map(|t| t.as_millis()),
        write_min_rate = ?args.connection_limits().write_min_rate,
        "front limits"
    );
    // One quarantine for both paths: a document that kills PDFium workers or stalls LibreOffice.
    let poison =
        Arc::new(PoisonList::new(Duration::from_millis(args.poison_ttl_ms), quarantine::CAPACITY));
    let office = Office::new(args.office(), args.job_deadline(), office_metrics, poison.clone())?;
    let office_status = office.status();
    tracing::info!(
        gotenberg = office_status.gotenberg_url.as_deref().unwrap_or("none (Office input is refused)"),
        share = office_status.admission.share,
        share_file = ?office_status.share_file,
        "office"
    );
    let auth = args.auth_token_file.as_deref().map(BearerToken::load).transpose()?;
    tracing::info!(bearer_token = auth.is_some(), token_file = ?args.auth_token_file, "document routes");
    tracing::info!(
        trusted_roots = outbound::trusted_roots(),
        "outbound https (object stores, webhooks)"
    );
    let exe = match &args.worker_exe {
        Some(exe) => exe.clone(),
        None => std::env::current_exe().map_err(ServeError::CurrentExe)?,
    };
    // Hashed in pieces, once, before serving (a fraction of a second for a debug binary).
    let engine_version =
        tokio::task::block_in_place(|| EngineVersion::of_files(&[&exe, &pdfium], args.op_limits()))
            .map_err(ServeError::EngineVersion)?;
    let engine = Arc::new(Engine::start(
        EngineConfig {
            slots: plan.slots,
            queue_depth: args.queue_depth.max(1),
            job_deadline: args.job_deadline(),
            recycle_after_jobs: args.recycle_after_jobs.max(1),
            recycle_rss: args.recycle_rss(),
            cancel_grace: Duration::from_millis(args.cancel_grace_ms),
            stop_grace: Duration::from_secs(5),
            worker: WorkerCommand {
                exe,
                args: WorkerArgs::command_line(&WorkerOptions {
                    limits: args.op_limits(),
                    pdfium: pdfium.clone(),
                    sandbox: args.sandbox,
                    probe: args.sandbox_probe,
                }),
                ready_timeout: Duration::from_secs(30),
                confinement: Confinement {
                    nice: args.worker_nice,
                    memory_ceiling: args.memory_ceiling(),
                },
            },
            answers: answers.clone(),
        },
        engine_metrics,
        poison,
    ));
    let objects =
        args.jobs.objects()?.map(|config| Arc::new(Objects::new(config, documents.clone())));
    if let Some(objects) = &objects {
        let config = objects.config();
        tracing::info!(backend = ?config.backend, read = ?config.read_buckets, write = ?config.write_buckets, ca = ?config.ca, "object store");
    }
    let job_front = match (args.jobs.broker(), &objects) {
        (Some(broker), None) => {
            drop(broker);
            return Err(JobsConfigError::NoStore.into());
        }
        (Some(broker), Some(objects)) => {
            let upload = args.jobs.upload_url(objects.config().backend.scheme())?;
            let broker = Broker::connect(broker).await?;
            tracing::info!(nats = %broker.config.url, stream = %broker.config.stream, "job broker");
            let backlog = Arc::new(Backlog::default());
            exposition.add(&*backlog);
            tokio::spawn(backlog::watch(backlog.clone(), broker.clone()));
            Some(JobsFront { broker, upload, backlog })
        }
        (None, _) => None,
    };
    let webhook = args.jobs.webhook()?;
    let share_watch = office.watch_share();
    let lifecycle = Arc::new(Lifecycle::new());
    let state = Arc::new(AppState {
        engine: engine.clone(),
        metrics: front_metrics,
        exposition: Arc::new(exposition),
        office,
        lifecycle: lifecycle.clone(),
        plan: PlanView::new(&plan, detected),
        max_body_bytes: args.max_body_bytes,
        max_pages: args.max_pages,
        uploads,
        documents,
        answers,
        streamed_documents: Arc::default(),
        thumbnails: args.thumbnail_limits(),
        engine_version,
        auth,
        objects: objects.clone(),
        jobs: job_front.clone(),
    });
    let jobs = match (job_front, objects) {
        (Some(front), Some(objects)) => {
            let config = JobsConfig {
                pull: args.jobs.jobs_pull,
                max_strikes: args.jobs.jobs_max_deliveries,
                ack_wait: std::time::Duration::from_millis(args.jobs.jobs_ack_wait_ms),
                webhook,
                limits: JobLimits {
                    max_body_bytes: state.uploads.limits.max_bytes,
                    max_pages: args.max_pages,
                    thumbnails: args.thumbnail_limits(),
                    job_deadline: args.job_deadline(),
                },
            };
            Some(Jobs::start(config, jobs_metrics, front.broker, objects, &state).await?)
        }
        _ => None,
    };
    let listener = listen::bind(args.listen)
        .await
        .map_err(|source| ServeError::Listen { addr: args.listen, source })?;
    let local = listener.local_addr().map_err(ServeError::Server)?;
    tracing::info!(listen = %local, "listening");

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(http::server::serve(
        listener,
        http::router(state.clone()),
        args.connection_limits(),
        state.metrics.clone(),
        async move {
            let _ = stop_rx.await;
        },
    ));
    let signal = signals.wait().await;
    // A draining pod takes no new job at once (readiness and the drain delay are for the
    // requests its load balancers still send).
    if let Some(jobs) = &jobs {
        jobs.stop_pulling();
    }
    drain::drain(&lifecycle, signal, Duration::from_millis(args.drain_delay_ms)).await;
    let _ = stop_tx.send(());
    let grace = Duration::from_millis(args.grace_period_ms);
    // Jobs stop being pulled and get the same grace as the requests in flight.
    let jobs_drained = async {
        if let Some(jobs) = &jobs {
            jobs.drain(grace).await;
        }
    };
    let (served, ()) = tokio::join!(tokio::time::timeout(grace, server), jobs_drained);
    match served {
        Ok(Ok(())) => tracing::info!("in-flight requests finished"),
        Ok(Err(join)) => tracing::error!(error = %join, "server task failed"),
        Err(_) => tracing::warn!(
            grace_ms = args.grace_period_ms,
            "grace period over; abandoning requests still in flight"
        ),
    }
    if let Some(watch) = share_watch {
        watch.abort();
    }
    engine.shutdown().await;
    tracing::info!("stopped");
    Ok(())
}
