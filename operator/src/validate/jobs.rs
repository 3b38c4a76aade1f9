//! `spec.jobs` checked again (the CRD's schema and CEL rules refuse most of this first, but not
//! for a RenderPool stored under an older CRD), and what the schema cannot say: the upload URL's
//! bucket among the buckets the pods may use.

use super::SpecError;
use crate::crd::JobsSpec;
use crate::crd::bounds::{NATS_SCHEMES, STREAM_REPLICAS, in_words, stream_replicas_in_words};
use renderpool_api::jobs::ObjectUrl;

/// Checks `spec.jobs`; the first problem found, named by its field.
pub(super) fn check(jobs: &JobsSpec) -> Result<(), SpecError> {
    let bad = |field: &str, problem: String| Err(SpecError::Jobs { field: field.into(), problem });
    if !NATS_SCHEMES.iter().any(|s| jobs.nats.url.starts_with(s)) {
        return bad("spec.jobs.nats.url", format!("must start with {}", in_words(&NATS_SCHEMES)));
    }
    if let Some(login) = &jobs.nats.credentials_secret_ref
        && login.creds_key.is_some() == login.token_key.is_some()
    {
        return bad(
            "spec.jobs.nats.credentialsSecretRef",
            "needs exactly one of credsKey and tokenKey".into(),
        );
    }
    if !STREAM_REPLICAS.contains(&jobs.stream.replicas) {
        return bad(
            "spec.jobs.stream.replicas",
            format!("is {}; it must be {}", jobs.stream.replicas, stream_replicas_in_words()),
        );
    }
    let objects = &jobs.objects;
    let stores = [objects.endpoint.is_some(), objects.gcs.is_some(), objects.azure.is_some()];
    if stores.iter().filter(|given| **given).count() != 1 {
        return bad(
            "spec.jobs.objects",
            "needs exactly one store: endpoint (S3), gcs or azure".into(),
        );
    }
    if objects.endpoint.is_some() != objects.credentials_secret_ref.is_some() {
        return bad(
            "spec.jobs.objects.credentialsSecretRef",
            "goes with jobs.objects.endpoint (S3), and only with it".into(),
        );
    }
    for (field, url) in [
        ("spec.jobs.objects.endpoint", objects.endpoint.as_ref()),
        (
            "spec.jobs.objects.azure.endpoint",
            objects.azure.as_ref().and_then(|a| a.endpoint.as_ref()),
        ),
    ] {
        if let Some(url) = url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return bad(field, "must start with http:// or https://".into());
        }
    }
    let scheme = objects.scheme();
    for (field, buckets) in [
        ("spec.jobs.objects.readBuckets", &objects.read_buckets),
        ("spec.jobs.objects.writeBuckets", &objects.write_buckets),
    ] {
        if buckets.is_empty() {
            return bad(field, "is empty: name at least one bucket".into());
        }
        // The render pod's own check of a bucket name.
        if let Some(name) = buckets.iter().find(|b| !scheme.valid_bucket(b)) {
            return bad(
                field,
                format!("has {name:?}, which {} takes as no bucket name", scheme.store()),
            );
        }
    }
    if let Some(upload) = &jobs.upload_url {
        let url = ObjectUrl::parse(upload).map_err(|e| SpecError::Jobs {
            field: "spec.jobs.uploadUrl".into(),
            problem: e.to_string(),
        })?;
        if url.scheme != scheme {
            return bad(
                "spec.jobs.uploadUrl",
                format!(
                    "is not on the pool's store, {}, which takes {scheme} URLs",
                    scheme.store()
                ),
            );
        }
        // The pods write the upload and then read it back as the job's document.
        if !(objects.write_buckets.contains(&url.bucket)
            && objects.read_buckets.contains(&url.bucket))
        {
            return bad(
                "spec.jobs.uploadUrl",
                format!(
                    "names bucket {}, which must be in both readBuckets and writeBuckets",
                    url.bucket
                ),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use crate::test_fixtures::spec_from_yaml;
    use crate::validate::validate;

    const GOOD: &str = "jobs:
  nats: {url: 'nats://nats:4222'}
  objects:
    endpoint: http://minio:9000
    credentialsSecretRef: {name: s3-keys}
    readBuckets: [inputs, uploads]
    writeBuckets: [outputs, uploads]
  uploadUrl: s3://uploads/jobs";

    /// The message `validate` gives for GOOD with `from` replaced by `to`.
    fn refusal(from: &str, to: &str) -> String {
        assert!(GOOD.contains(from), "{from}");
        let err = validate(&spec_from_yaml(&GOOD.replace(from, to))).unwrap_err();
        assert_eq!(err.reason(), "InvalidJobs");
        err.to_string()
    }

    #[test]
    fn a_good_jobs_spec_passes_and_its_stream_limits_default() {
        let spec = spec_from_yaml(GOOD);
        validate(&spec).unwrap();
        let stream = spec.jobs.unwrap().stream;
        assert_eq!(
            (stream.max_messages, stream.max_age_seconds, stream.replicas),
            (1_000_000, 604_800, 1)
        );
    }

    #[test]
    fn each_wrong_field_is_refused_by_its_path() {
        let cases = [
            ("nats://nats", "http://nats", "spec.jobs.nats.url must start with nats://"),
            ("http://minio", "minio", "spec.jobs.objects.endpoint must start with http://"),
            ("[inputs, uploads]", "[]", "spec.jobs.objects.readBuckets is empty"),
            ("[outputs, uploads]", "[out_puts]", "spec.jobs.objects.writeBuckets has \"out_puts\""),
            (
                "    credentialsSecretRef: {name: s3-keys}\n",
                "    credentialsSecretRef: {name: s3-keys}\n    gcs: {serviceAccountSecretRef: {name: g, key: k}}\n",
                "spec.jobs.objects needs exactly one store",
            ),
            ("    credentialsSecretRef: {name: s3-keys}\n", "", "credentialsSecretRef goes with"),
            ("s3://uploads/jobs", "gs://uploads/jobs", "is not on the pool's store, S3"),
            (
                "s3://uploads/jobs",
                "s3://outputs/jobs",
                "names bucket outputs, which must be in both",
            ),
            ("s3://uploads/jobs", "https://uploads/jobs", "spec.jobs.uploadUrl "),
            (
                "{url: 'nats://nats:4222'}",
                "{url: 'nats://nats:4222', credentialsSecretRef: {name: n}}",
                "needs exactly one of credsKey and tokenKey",
            ),
            (
                "{url: 'nats://nats:4222'}",
                "{url: 'nats://nats:4222', credentialsSecretRef: {name: n, credsKey: c, tokenKey: t}}",
                "needs exactly one of credsKey and tokenKey",
            ),
        ];
        for (from, to, message) in cases {
            let got = refusal(from, to);
            assert!(got.contains(message), "{to}: {got}");
        }
    }

    #[test]
    fn stream_limits_outside_what_nats_and_the_pod_take_are_refused() {
        let with = |stream: &str| {
            let yaml = format!("{GOOD}\n  stream: {stream}");
            validate(&spec_from_yaml(&yaml)).map(|_| ()).map_err(|e| e.to_string())
        };
        assert_eq!(with("{replicas: 3}"), Ok(()));
        assert_eq!(
            with("{replicas: 2}").unwrap_err(),
            "spec.jobs.stream.replicas is 2; it must be 1, 3 or 5"
        );
        assert!(
            with("{maxAgeSeconds: 59}")
                .unwrap_err()
                .starts_with("spec.jobs.stream.maxAgeSeconds is 59")
        );
        assert!(
            with("{maxMessages: 0}").unwrap_err().starts_with("spec.jobs.stream.maxMessages is 0")
        );
    }
}
