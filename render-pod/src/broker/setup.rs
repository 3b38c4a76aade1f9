//! Making or checking what the pool needs on the broker at start: the work-queue stream with
//! its limits, the dead-letter stream, the durable pull consumer. Every pod does this; the first
//! makes them, the others find them as asked (or bring the limits to what their flags say).

use std::time::Duration;

use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, PullConsumer, pull};
use async_nats::jetstream::context::GetStreamErrorKind;
use async_nats::jetstream::stream::{self, DiscardPolicy, RetentionPolicy};
use async_nats::jetstream::{self, ErrorCode};

use super::{BrokerConfig, BrokerError};

/// How long the stream remembers a message id to drop a duplicate publish.
pub const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

/// The jobs' stream as the flags describe it.
pub fn jobs_stream(config: &BrokerConfig) -> stream::Config {
    stream::Config {
        name: config.stream.clone(),
        description: Some("renderpool durable jobs (work queue)".into()),
        subjects: vec![config.subjects.submit.clone()],
        // A job is removed once acknowledged: the stream holds only the backlog.
        retention: RetentionPolicy::WorkQueue,
        // A full stream refuses new jobs rather than dropping queued ones.
        discard: DiscardPolicy::New,
        max_messages: config.max_messages,
        max_age: config.max_age,
        num_replicas: config.replicas.max(1),
        duplicate_window: DUPLICATE_WINDOW,
        ..Default::default()
    }
}

/// The dead-letter stream: kept like the backlog (same age and replicas), read by people.
pub fn dead_letter_stream(config: &BrokerConfig) -> stream::Config {
    stream::Config {
        name: config.dead_letter_stream.clone(),
        description: Some("renderpool jobs that kept killing workers or pods".into()),
        subjects: vec![config.subjects.dead.clone()],
        retention: RetentionPolicy::Limits,
        max_messages: config.max_messages,
        max_age: config.max_age,
        num_replicas: config.replicas.max(1),
        duplicate_window: DUPLICATE_WINDOW,
        ..Default::default()
    }
}

/// What makes an existing stream unusable as `wanted` (a different retention, or not the
/// subjects), or `None`.
pub fn unusable(found: &stream::Config, wanted: &stream::Config) -> Option<String> {
    if found.retention != wanted.retention {
        return Some(format!(
            "exists with retention {:?}, the pool needs {:?}: delete it or name another stream",
            found.retention, wanted.retention
        ));
    }
    let missing: Vec<&String> =
        wanted.subjects.iter().filter(|s| !found.subjects.contains(s)).collect();
    if !missing.is_empty() {
        return Some(format!(
            "exists without the subjects {missing:?} (it has {:?}): delete it or name another stream",
            found.subjects
        ));
    }
    None
}

/// Whether the limits the flags set differ from the stream's.
pub fn limits_differ(found: &stream::Config, wanted: &stream::Config) -> bool {
    found.max_messages != wanted.max_messages
        || found.max_age != wanted.max_age
        || found.num_replicas != wanted.num_replicas
        || found.discard != wanted.discard
}

async fn ensure(jetstream: &jetstream::Context, wanted: stream::Config) -> Result<(), BrokerError> {
    let name = wanted.name.clone();
    let stream_error = |detail: String| BrokerError::Stream { stream: name.clone(), detail };
    let mut found = match jetstream.get_stream(&name).await {
        Ok(found) => found,
        Err(e)
            if matches!(e.kind(), GetStreamErrorKind::JetStream(js)
                if js.error_code() == ErrorCode::STREAM_NOT_FOUND) =>
        {
            jetstream.create_stream(wanted).await.map_err(|e| stream_error(e.to_string()))?;
            tracing::info!(stream = %name, "made the stream");
            return Ok(());
        }
        Err(e) => return Err(stream_error(e.to_string())),
    };
    let info = found.info().await.map_err(|e| stream_error(e.to_string()))?;
    if let Some(why) = unusable(&info.config, &wanted) {
        return Err(stream_error(why));
    }
    if limits_differ(&info.config, &wanted) {
        let config = stream::Config {
            max_messages: wanted.max_messages,
            max_age: wanted.max_age,
            num_replicas: wanted.num_replicas,
            discard: wanted.discard,
            ..info.config.clone()
        };
        jetstream.update_stream(config).await.map_err(|e| stream_error(e.to_string()))?;
        tracing::info!(stream = %name, "brought the stream's limits to this pod's flags");
    }
    Ok(())
}

/// Makes or checks both streams.
pub async fn streams(
    jetstream: &jetstream::Context,
    config: &BrokerConfig,
) -> Result<(), BrokerError> {
    ensure(jetstream, jobs_stream(config)).await?;
    ensure(jetstream, dead_letter_stream(config)).await
}

/// The durable pull consumer as the flags describe it. Redeliveries are counted and judged by
/// the pod (it moves a job to the dead-letter stream with its reason), so the broker never
/// stops delivering on its own.
pub fn consumer_config(config: &BrokerConfig) -> pull::Config {
    pull::Config {
        durable_name: Some(config.consumer.clone()),
        description: Some("renderpool render pods".into()),
        deliver_policy: DeliverPolicy::All,
        ack_policy: AckPolicy::Explicit,
        ack_wait: config.ack_wait,
        max_deliver: -1,
        filter_subject: config.subjects.submit.clone(),
        ..Default::default()
    }
}

/// Makes the consumer, or brings it to the flags' settings.
pub async fn consumer(
    jetstream: &jetstream::Context,
    config: &BrokerConfig,
) -> Result<PullConsumer, BrokerError> {
    let stream = jetstream
        .get_stream(&config.stream)
        .await
        .map_err(|e| BrokerError::request("finding the jobs' stream", e))?;
    stream
        .create_consumer(consumer_config(config))
        .await
        .map_err(|e| BrokerError::request("making the jobs' consumer", e))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use renderpool_api::jobs::{Subjects, defaults};

    fn config() -> BrokerConfig {
        BrokerConfig {
            url: "nats://127.0.0.1:4222".into(),
            creds_file: None,
            token_file: None,
            stream: defaults::STREAM.into(),
            dead_letter_stream: defaults::DEAD_LETTER_STREAM.into(),
            subjects: Subjects::under(defaults::SUBJECT_PREFIX),
            consumer: defaults::CONSUMER.into(),
            state_bucket: defaults::STATE_BUCKET.into(),
            max_messages: 100_000,
            max_age: Duration::from_secs(86_400),
            replicas: 1,
            state_ttl: Duration::from_secs(86_400),
            ack_wait: Duration::from_secs(30),
            max_deliveries: 3,
        }
    }

    #[test]
    fn a_stream_of_another_kind_is_refused_and_limits_are_compared() {
        let wanted = jobs_stream(&config());
        assert_eq!(wanted.subjects, ["renderpool.jobs.submit"]);
        assert!(unusable(&wanted, &wanted).is_none());
        let limits = stream::Config { retention: RetentionPolicy::Limits, ..wanted.clone() };
        assert!(unusable(&limits, &wanted).unwrap().contains("retention"));
        let other = stream::Config { subjects: vec!["x.>".into()], ..wanted.clone() };
        assert!(unusable(&other, &wanted).unwrap().contains("subjects"));
        assert!(!limits_differ(&wanted, &wanted));
        let older = stream::Config { max_messages: 5, ..wanted.clone() };
        assert!(limits_differ(&older, &wanted));
        let dead = dead_letter_stream(&config());
        assert_eq!(dead.subjects, ["renderpool.jobs.dead"]);
        assert_eq!(dead.retention, RetentionPolicy::Limits);
        let consumer = consumer_config(&config());
        assert_eq!((consumer.ack_policy, consumer.max_deliver), (AckPolicy::Explicit, -1));
    }
}
