//! `spec.jobs` in the render pods: the settings as variables, each Secret as a read-only volume
//! at a fixed folder with the `*_FILE` variable naming the file in it. No Secret value is ever in
//! the pod spec; the pod reads the files at start.

use super::common::{env, secret_files};
use crate::crd::JobsSpec;
use k8s_openapi::api::core::v1::{EnvVar, Volume, VolumeMount};
use renderpool_api::jobs::QueueNames;
use renderpool_api::render_pod::env as var;

/// Folder of the NATS login, and the file names in it.
const NATS_MOUNT: &str = "/etc/renderpool/nats";
const NATS_CREDS: &str = "creds";
const NATS_TOKEN: &str = "token";
/// Folder of the S3 credentials, and the file names in it.
const S3_MOUNT: &str = "/etc/renderpool/s3";
const S3_ACCESS_KEY_ID: &str = "access-key-id";
const S3_SECRET_ACCESS_KEY: &str = "secret-access-key";
/// Folder of the GCS service account key, and its file name.
const GCS_MOUNT: &str = "/etc/renderpool/gcs";
const GCS_SERVICE_ACCOUNT: &str = "service-account.json";
/// Folder of the Azure access key, and its file name.
const AZURE_MOUNT: &str = "/etc/renderpool/azure";
const AZURE_ACCESS_KEY: &str = "access-key";
/// Folder of the object store's CA certificates, and their file name.
const OBJECTS_CA_MOUNT: &str = "/etc/renderpool/objects-ca";
const OBJECTS_CA: &str = "ca.crt";
/// Folder of the webhook signing secret, and its file name.
const WEBHOOK_MOUNT: &str = "/etc/renderpool/webhook";
const WEBHOOK_SECRET: &str = "secret";

/// What `spec.jobs` adds to the render container: variables, volumes and their mounts.
#[derive(Debug, Default)]
pub(super) struct JobsParts {
    pub vars: Vec<EnvVar>,
    pub volumes: Vec<Volume>,
    pub mounts: Vec<VolumeMount>,
}

impl JobsParts {
    fn secret(&mut self, volume: &str, secret: &str, items: &[(&str, &str)], folder: &str) {
        let (v, m) = secret_files(volume, secret, items, folder);
        self.volumes.push(v);
        self.mounts.push(m);
    }
}

/// The render container's part of `spec.jobs`.
pub(super) fn parts(jobs: &JobsSpec) -> JobsParts {
    let mut p = JobsParts::default();
    p.vars.push(env(var::JOBS_NATS_URL, jobs.nats.url.clone()));
    if let Some(login) = &jobs.nats.credentials_secret_ref {
        // Validation lets exactly one of the two keys through.
        let creds =
            login.creds_key.as_ref().map(|key| (key, NATS_CREDS, var::JOBS_NATS_CREDS_FILE));
        let token =
            login.token_key.as_ref().map(|key| (key, NATS_TOKEN, var::JOBS_NATS_TOKEN_FILE));
        if let Some((key, file, file_var)) = creds.or(token) {
            p.secret("jobs-nats", &login.name, &[(key, file)], NATS_MOUNT);
            p.vars.push(env(file_var, format!("{NATS_MOUNT}/{file}")));
        }
    }
    let queue = QueueNames::of(&jobs.queue);
    p.vars.push(env(var::JOBS_STREAM, queue.stream));
    p.vars.push(env(var::JOBS_DEAD_LETTER_STREAM, queue.dead_letter_stream));
    p.vars.push(env(var::JOBS_SUBJECT_PREFIX, queue.subject_prefix));
    p.vars.push(env(var::JOBS_STATE_BUCKET, queue.state_bucket));
    let stream = &jobs.stream;
    p.vars.push(env(var::JOBS_STREAM_MAX_MESSAGES, stream.max_messages.to_string()));
    p.vars.push(env(var::JOBS_STREAM_MAX_AGE_SECS, stream.max_age_seconds.to_string()));
    p.vars.push(env(var::JOBS_STREAM_REPLICAS, stream.replicas.to_string()));
    let ack_wait_ms = i64::from(jobs.ack_wait_seconds).saturating_mul(1000);
    p.vars.push(env(var::JOBS_ACK_WAIT_MS, ack_wait_ms.to_string()));
    p.vars.push(env(var::JOBS_MAX_DELIVERIES, jobs.max_deliveries.to_string()));
    let objects = &jobs.objects;
    // Validation lets exactly one store through.
    if let (Some(endpoint), Some(keys)) = (&objects.endpoint, &objects.credentials_secret_ref) {
        p.vars.push(env(var::OBJECTS_S3_ENDPOINT, endpoint.clone()));
        p.vars.push(env(var::OBJECTS_S3_REGION, objects.region.clone()));
        p.secret(
            "jobs-s3",
            &keys.name,
            &[
                (&keys.access_key_id_key, S3_ACCESS_KEY_ID),
                (&keys.secret_access_key_key, S3_SECRET_ACCESS_KEY),
            ],
            S3_MOUNT,
        );
        p.vars.push(env(
            var::OBJECTS_S3_ACCESS_KEY_ID_FILE,
            format!("{S3_MOUNT}/{S3_ACCESS_KEY_ID}"),
        ));
        p.vars.push(env(
            var::OBJECTS_S3_SECRET_ACCESS_KEY_FILE,
            format!("{S3_MOUNT}/{S3_SECRET_ACCESS_KEY}"),
        ));
    }
    if let Some(gcs) = &objects.gcs {
        let key = &gcs.service_account_secret_ref;
        p.secret("jobs-gcs", &key.name, &[(&key.key, GCS_SERVICE_ACCOUNT)], GCS_MOUNT);
        p.vars.push(env(
            var::OBJECTS_GCS_SERVICE_ACCOUNT_FILE,
            format!("{GCS_MOUNT}/{GCS_SERVICE_ACCOUNT}"),
        ));
    }
    if let Some(azure) = &objects.azure {
        let key = &azure.access_key_secret_ref;
        p.secret("jobs-azure", &key.name, &[(&key.key, AZURE_ACCESS_KEY)], AZURE_MOUNT);
        p.vars.push(env(var::OBJECTS_AZURE_ACCOUNT, azure.account.clone()));
        p.vars.push(env(
            var::OBJECTS_AZURE_ACCESS_KEY_FILE,
            format!("{AZURE_MOUNT}/{AZURE_ACCESS_KEY}"),
        ));
        if let Some(endpoint) = &azure.endpoint {
            p.vars.push(env(var::OBJECTS_AZURE_ENDPOINT, endpoint.clone()));
        }
    }
    if let Some(ca) = &objects.ca_secret_ref {
        p.secret("jobs-objects-ca", &ca.name, &[(&ca.key, OBJECTS_CA)], OBJECTS_CA_MOUNT);
        p.vars.push(env(var::OBJECTS_CA_FILE, format!("{OBJECTS_CA_MOUNT}/{OBJECTS_CA}")));
    }
    p.vars.push(env(var::OBJECTS_READ_BUCKETS, objects.read_buckets.join(",")));
    p.vars.push(env(var::OBJECTS_WRITE_BUCKETS, objects.write_buckets.join(",")));
    if let Some(upload) = &jobs.upload_url {
        p.vars.push(env(var::JOBS_UPLOAD_URL, upload.clone()));
    }
    if let Some(secret) = &jobs.webhook_secret_ref {
        p.secret("jobs-webhook", &secret.name, &[(&secret.key, WEBHOOK_SECRET)], WEBHOOK_MOUNT);
        p.vars
            .push(env(var::JOBS_WEBHOOK_SECRET_FILE, format!("{WEBHOOK_MOUNT}/{WEBHOOK_SECRET}")));
    }
    p.vars.push(env(var::JOBS_WEBHOOK_ALLOW_PRIVATE, jobs.webhook_allow_private.to_string()));
    p
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use crate::build::tests::{children, container, env_map, parse_as_the_pod};
    use k8s_openapi::api::core::v1::PodSpec;
    use renderpool_api::jobs::Scheme;
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    /// A pool with every part of spec.jobs, each Secret's key named unlike its file.
    const FULL: &str = "jobs:
  nats:
    url: nats://nats.nats:4222
    credentialsSecretRef: {name: nats-login, credsKey: user.creds}
  queue: shop-extract
  stream: {maxMessages: 5000, maxAgeSeconds: 3600, replicas: 3}
  ackWaitSeconds: 12
  maxDeliveries: 5
  objects:
    endpoint: http://minio.storage:9000
    region: eu-west-1
    credentialsSecretRef: {name: s3-keys, accessKeyIdKey: id, secretAccessKeyKey: key}
    caSecretRef: {name: minio-ca, key: root.pem}
    readBuckets: [inputs, uploads]
    writeBuckets: [outputs, uploads]
  uploadUrl: s3://uploads/jobs
  webhookSecretRef: {name: hooks, key: signing}
  webhookAllowPrivate: true";

    /// The least a pool needs for jobs: a server and a store.
    const MINIMAL: &str = "jobs:
  nats: {url: 'nats://nats:4222'}
  objects:
    endpoint: https://s3.example
    credentialsSecretRef: {name: s3-keys}
    readBuckets: [inputs]
    writeBuckets: [outputs]";

    fn pod(yaml: &str) -> PodSpec {
        children(yaml).render.deployment.spec.template.spec.unwrap()
    }

    /// Each Secret volume as (volume, Secret, [(key, file)]), and each mount as (volume, folder).
    type Secrets = BTreeMap<String, (String, Vec<(String, String)>)>;
    fn secrets(pod: &PodSpec) -> (Secrets, BTreeMap<String, String>) {
        let volumes = pod.volumes.clone().unwrap();
        let secrets = volumes
            .into_iter()
            .filter_map(|v| {
                let s = v.secret?;
                assert_eq!((s.optional, s.default_mode), (Some(false), Some(0o440)), "{}", v.name);
                let items = s.items.unwrap().into_iter().map(|i| (i.key, i.path)).collect();
                Some((v.name, (s.secret_name.unwrap(), items)))
            })
            .collect();
        let mounts = pod.containers[0]
            .volume_mounts
            .clone()
            .unwrap()
            .into_iter()
            .filter(|m| m.name.starts_with("jobs-"))
            .map(|m| {
                assert_eq!((m.read_only, &m.sub_path), (Some(true), &None), "{}", m.name);
                (m.name, m.mount_path)
            })
            .collect();
        (secrets, mounts)
    }

    #[test]
    fn each_secret_is_a_read_only_folder_and_its_variable_names_the_file() {
        let pod = pod(FULL);
        let (secrets, mounts) = secrets(&pod);
        let pair = |k: &str, f: &str| (k.to_string(), f.to_string());
        assert_eq!(secrets["jobs-nats"], ("nats-login".into(), vec![pair("user.creds", "creds")]));
        assert_eq!(
            secrets["jobs-s3"],
            ("s3-keys".into(), vec![pair("id", "access-key-id"), pair("key", "secret-access-key")])
        );
        assert_eq!(secrets["jobs-webhook"], ("hooks".into(), vec![pair("signing", "secret")]));
        assert_eq!(
            secrets["jobs-objects-ca"],
            ("minio-ca".into(), vec![pair("root.pem", "ca.crt")])
        );
        let env = env_map(&pod.containers[0]);
        for (volume, file_var, file) in [
            ("jobs-nats", "RENDERPOD_JOBS_NATS_CREDS_FILE", "creds"),
            ("jobs-s3", "RENDERPOD_OBJECTS_S3_ACCESS_KEY_ID_FILE", "access-key-id"),
            ("jobs-s3", "RENDERPOD_OBJECTS_S3_SECRET_ACCESS_KEY_FILE", "secret-access-key"),
            ("jobs-webhook", "RENDERPOD_JOBS_WEBHOOK_SECRET_FILE", "secret"),
            ("jobs-objects-ca", "RENDERPOD_OBJECTS_CA_FILE", "ca.crt"),
        ] {
            assert_eq!(env[file_var], format!("{}/{file}", mounts[volume]), "{file_var}");
        }
        assert!(!env.contains_key("RENDERPOD_JOBS_NATS_TOKEN_FILE"));
    }

    #[test]
    fn no_variable_holds_a_secret_and_none_is_read_from_a_secret_by_reference() {
        for yaml in [FULL, MINIMAL] {
            let pod = pod(yaml);
            for var in pod.containers[0].env.clone().unwrap() {
                assert!(
                    var.value_from.is_none(),
                    "{}: secrets are files, never variables",
                    var.name
                );
            }
            // Only the key names and Secret names of the spec reach the pod spec, never data.
            let text = serde_json::to_string(&pod).unwrap();
            assert!(!text.contains("stringData") && !text.contains("\"data\""), "{yaml}");
        }
    }

    #[test]
    fn the_pod_parses_the_jobs_settings_as_the_spec_gave_them() {
        let args =
            parse_as_the_pod(&env_map(container(&children(FULL).render.deployment))).unwrap();
        let jobs = args.jobs;
        let broker = jobs.broker().unwrap();
        assert_eq!(broker.url, "nats://nats.nats:4222");
        assert_eq!(broker.creds_file, Some(PathBuf::from("/etc/renderpool/nats/creds")));
        assert_eq!(broker.token_file, None);
        assert_eq!(
            (broker.max_messages, broker.max_age.as_secs(), broker.replicas),
            (5000, 3600, 3)
        );
        assert_eq!((broker.ack_wait.as_secs(), broker.max_deliveries), (12, 5));
        // The queue's own names: no other pool's stream, subjects or states.
        assert_eq!(
            (broker.stream.as_str(), broker.dead_letter_stream.as_str()),
            ("RENDERPOOL_SHOP_EXTRACT", "RENDERPOOL_SHOP_EXTRACT_DEAD")
        );
        assert_eq!(broker.subjects.submit, "renderpool.shop-extract.submit");
        assert_eq!(broker.state_bucket, "renderpool_shop_extract");
        assert_eq!(jobs.objects_s3_endpoint.as_deref(), Some("http://minio.storage:9000"));
        assert_eq!(jobs.objects_s3_region, "eu-west-1");
        assert_eq!(jobs.objects_read_buckets, ["inputs", "uploads"]);
        assert_eq!(jobs.objects_write_buckets, ["outputs", "uploads"]);
        assert_eq!(jobs.objects_ca_file, Some(PathBuf::from("/etc/renderpool/objects-ca/ca.crt")));
        assert_eq!(jobs.upload_url(Scheme::S3).unwrap().unwrap().bucket, "uploads");
        assert!(jobs.jobs_webhook_allow_private);
    }

    #[test]
    fn a_minimal_spec_runs_the_stream_and_queue_at_the_pods_own_defaults() {
        let pool = parse_as_the_pod(&env_map(container(&children(MINIMAL).render.deployment)));
        let pool = pool.unwrap().jobs;
        let own = parse_as_the_pod(&BTreeMap::from([(
            "RENDERPOD_JOBS_NATS_URL".to_string(),
            "nats://nats:4222".to_string(),
        )]))
        .unwrap()
        .jobs;
        let (pool_broker, own_broker) = (pool.broker().unwrap(), own.broker().unwrap());
        assert_eq!(pool_broker.max_messages, own_broker.max_messages);
        assert_eq!(pool_broker.max_age, own_broker.max_age);
        assert_eq!(pool_broker.replicas, own_broker.replicas);
        assert_eq!(pool_broker.ack_wait, own_broker.ack_wait);
        assert_eq!(pool_broker.max_deliveries, own_broker.max_deliveries);
        assert_eq!(
            (&pool_broker.stream, &pool_broker.dead_letter_stream, &pool_broker.state_bucket),
            (&own_broker.stream, &own_broker.dead_letter_stream, &own_broker.state_bucket)
        );
        assert_eq!(pool_broker.subjects, own_broker.subjects);
        assert_eq!(pool.objects_s3_region, own.objects_s3_region);
        assert_eq!((pool_broker.creds_file, pool_broker.token_file), (None, None));
        assert!(!pool.jobs_webhook_allow_private && pool.jobs_webhook_secret_file.is_none());
        assert_eq!(pool.jobs_upload_url, None);
        assert_eq!(pool.objects_ca_file, None);
    }

    #[test]
    fn a_gcs_or_azure_store_mounts_its_key_and_the_pod_takes_its_urls() {
        let s3 = "    endpoint: https://s3.example\n    credentialsSecretRef: {name: s3-keys}\n";
        for (store, volume, file_var, file, scheme) in [
            (
                "    gcs: {serviceAccountSecretRef: {name: gcs-key, key: sa.json}}\n",
                "jobs-gcs",
                "RENDERPOD_OBJECTS_GCS_SERVICE_ACCOUNT_FILE",
                "service-account.json",
                Scheme::Gs,
            ),
            (
                "    azure: {account: shop, accessKeySecretRef: {name: az-key, key: k}, endpoint: 'http://azurite:10000/shop'}\n",
                "jobs-azure",
                "RENDERPOD_OBJECTS_AZURE_ACCESS_KEY_FILE",
                "access-key",
                Scheme::Az,
            ),
        ] {
            let yaml = MINIMAL.replace(s3, store);
            let pod = pod(&yaml);
            let (secrets, mounts) = secrets(&pod);
            assert!(!secrets.contains_key("jobs-s3"), "{store}");
            assert_eq!(secrets[volume].1.len(), 1, "{store}");
            assert_eq!(secrets[volume].1[0].1, file);
            let env = env_map(&pod.containers[0]);
            assert_eq!(env[file_var], format!("{}/{file}", mounts[volume]));
            assert!(!env.contains_key("RENDERPOD_OBJECTS_S3_ENDPOINT"));
            let args = parse_as_the_pod(&env).unwrap();
            let mut jobs = args.jobs;
            jobs.jobs_upload_url = Some(format!("{scheme}outputs/jobs"));
            assert_eq!(jobs.upload_url(scheme).unwrap().unwrap().scheme, scheme);
            assert!(jobs.upload_url(Scheme::S3).is_err(), "{store}: not an S3 URL");
        }
    }

    #[test]
    fn a_nats_token_is_mounted_as_the_token_file() {
        let yaml = MINIMAL.replace(
            "url: 'nats://nats:4222'}",
            "url: 'nats://nats:4222', credentialsSecretRef: {name: nats-token, tokenKey: t}}",
        );
        let pod = pod(&yaml);
        let (secrets, _) = secrets(&pod);
        assert_eq!(secrets["jobs-nats"].1, [("t".to_string(), "token".to_string())]);
        let env = env_map(&pod.containers[0]);
        assert_eq!(env["RENDERPOD_JOBS_NATS_TOKEN_FILE"], "/etc/renderpool/nats/token");
        assert!(!env.contains_key("RENDERPOD_JOBS_NATS_CREDS_FILE"));
    }

    #[test]
    fn without_jobs_the_deployment_is_the_one_jobs_add_to() {
        for base in [
            "replicas: 2",
            "gotenberg: {enabled: false}\nauth:\n  tokenSecretRef: {name: t, key: k}",
        ] {
            let without = children(base).render.deployment;
            let with = children(&format!("{base}\n{FULL}")).render.deployment;
            // Take out exactly what jobs add: the rest is today's Deployment, unchanged.
            let mut stripped = with.clone();
            let pod = stripped.spec.template.spec.as_mut().unwrap();
            pod.volumes.as_mut().unwrap().retain(|v| !v.name.starts_with("jobs-"));
            let c = &mut pod.containers[0];
            c.volume_mounts.as_mut().unwrap().retain(|m| !m.name.starts_with("jobs-"));
            c.env.as_mut().unwrap().retain(|e| {
                !(e.name.starts_with("RENDERPOD_JOBS_") || e.name.starts_with("RENDERPOD_OBJECTS_"))
            });
            assert_eq!(stripped, without, "{base}");
            assert_ne!(with, without);
            let env = env_map(container(&without));
            assert!(
                env.keys().all(|k| !k.contains("_JOBS_") && !k.contains("_OBJECTS_")),
                "{base}"
            );
        }
    }
}
