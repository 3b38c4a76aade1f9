//! `spec.jobs` on the real API server: the CRD fills the stream's defaults and refuses bad
//! shapes with its messages; the operator gives the render pods the settings as variables and
//! each Secret as a read-only file, and no Secret value reaches the Deployment. No NATS or S3
//! runs here: this checks the objects against the spec (the render pod's own tests cover the
//! jobs themselves).

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use renderpool_operator::crd::RenderPool;
use serde_json::{Value, json};

use super::operator_support::{
    container_env, kubectl_apply, pool_manifest, setup, wait_deployment, wait_pool,
};

const WAIT: Duration = Duration::from_secs(90);
/// The Secrets' values: none may appear anywhere in the Deployment.
const SECRET_VALUES: [&str; 4] =
    ["nats-token-value-7f3a", "AKIAEXAMPLEKEYID9Q", "s3-secret-value-2b8c", "whsec_c2lnbmluZw=="];

/// A small pool without Gotenberg, with `jobs`.
fn spec(jobs: Value) -> Value {
    json!({"replicas": 1, "cpu": "1", "memory": "1Gi", "gotenberg": {"enabled": false},
           "jobs": jobs})
}

fn jobs() -> Value {
    json!({
        "nats": {"url": "nats://nats.nats:4222",
                 "credentialsSecretRef": {"name": "jobs-nats", "tokenKey": "token"}},
        "objects": {"endpoint": "http://minio.storage:9000",
                    "credentialsSecretRef": {"name": "jobs-s3"},
                    "readBuckets": ["inputs", "uploads"], "writeBuckets": ["outputs", "uploads"]},
        "uploadUrl": "s3://uploads/jobs",
        "webhookSecretRef": {"name": "jobs-webhook", "key": "signing"}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_reach_the_render_pods_as_variables_and_secret_files_only() {
    let (cluster, _operator) = setup().await;
    let ns = cluster.namespace("op-jobs").await;
    let client = cluster.client().await;
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client, ns.name());
    for (name, data) in [
        ("jobs-nats", json!({"token": SECRET_VALUES[0]})),
        (
            "jobs-s3",
            json!({"access-key-id": SECRET_VALUES[1], "secret-access-key": SECRET_VALUES[2]}),
        ),
        ("jobs-webhook", json!({"signing": SECRET_VALUES[3]})),
    ] {
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                            "stringData": data});
        kubectl_apply(cluster, ns.name(), &secret.to_string()).unwrap();
    }
    kubectl_apply(cluster, ns.name(), &pool_manifest("queued", spec(jobs()))).unwrap();

    // The API server filled the stream's limits with the render pod's defaults.
    let pool = wait_pool(&pools, "queued", WAIT, |p| p.status.is_some()).await;
    let stream = pool.spec.jobs.unwrap().stream;
    assert_eq!(
        (stream.max_messages, stream.max_age_seconds, stream.replicas),
        (1_000_000, 604_800, 1)
    );

    let render = wait_deployment(&deployments, "queued-render", WAIT, |d| {
        container_env(d).contains_key("RENDERPOD_JOBS_NATS_URL")
    })
    .await;
    let env = container_env(&render);
    for (name, value) in [
        ("RENDERPOD_JOBS_NATS_URL", "nats://nats.nats:4222"),
        ("RENDERPOD_JOBS_NATS_TOKEN_FILE", "/etc/renderpool/nats/token"),
        ("RENDERPOD_JOBS_STREAM_MAX_MESSAGES", "1000000"),
        ("RENDERPOD_JOBS_STREAM_MAX_AGE_SECS", "604800"),
        ("RENDERPOD_JOBS_STREAM_REPLICAS", "1"),
        ("RENDERPOD_OBJECTS_S3_ENDPOINT", "http://minio.storage:9000"),
        ("RENDERPOD_OBJECTS_S3_REGION", "us-east-1"),
        ("RENDERPOD_OBJECTS_S3_ACCESS_KEY_ID_FILE", "/etc/renderpool/s3/access-key-id"),
        ("RENDERPOD_OBJECTS_S3_SECRET_ACCESS_KEY_FILE", "/etc/renderpool/s3/secret-access-key"),
        ("RENDERPOD_OBJECTS_READ_BUCKETS", "inputs,uploads"),
        ("RENDERPOD_OBJECTS_WRITE_BUCKETS", "outputs,uploads"),
        ("RENDERPOD_JOBS_UPLOAD_URL", "s3://uploads/jobs"),
        ("RENDERPOD_JOBS_WEBHOOK_SECRET_FILE", "/etc/renderpool/webhook/secret"),
    ] {
        assert_eq!(env.get(name).map(String::as_str), Some(value), "{name}");
    }
    let pod = render.spec.template.spec.as_ref().unwrap();
    let secrets: Vec<(String, String)> = pod
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| Some((v.name.clone(), v.secret.as_ref()?.secret_name.clone()?)))
        .collect();
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(
        secrets,
        [
            pair("jobs-nats", "jobs-nats"),
            pair("jobs-s3", "jobs-s3"),
            pair("jobs-webhook", "jobs-webhook")
        ]
    );
    let mounts = pod.containers[0].volume_mounts.iter().flatten();
    for mount in mounts.filter(|m| m.name.starts_with("jobs-")) {
        assert_eq!(mount.read_only, Some(true), "{}", mount.name);
    }
    // The Deployment as stored holds Secret names and keys, never a value.
    let stored = serde_json::to_string(&render).unwrap();
    for value in SECRET_VALUES {
        assert!(!stored.contains(value), "a Secret value is in the Deployment");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crd_refuses_jobs_the_render_pods_could_not_run() {
    let (cluster, _operator) = setup().await;
    let ns = cluster.namespace("op-jobs-refused").await;
    let with = |pointer: &str, value: Value| {
        let mut jobs = jobs();
        *jobs.pointer_mut(pointer).unwrap() = value;
        jobs
    };
    for (jobs, says) in [
        (with("/nats/url", json!("http://nats:4222")), "jobs.nats.url must start with nats://"),
        (
            with("/nats/credentialsSecretRef", json!({"name": "n"})),
            "needs exactly one of credsKey and tokenKey",
        ),
        (
            with("/objects/endpoint", json!("minio:9000")),
            "jobs.objects.endpoint must start with http:// or https://",
        ),
        (with("/objects/readBuckets", json!([])), "spec.jobs.objects.readBuckets"),
        (with("/objects/writeBuckets", json!(["Not_A_Bucket"])), "spec.jobs.objects.writeBuckets"),
        (with("/uploadUrl", json!("https://uploads/jobs")), "jobs.uploadUrl must be an s3://"),
    ]
    .into_iter()
    .chain([
        (
            {
                let mut jobs = jobs();
                jobs["stream"] = json!({"replicas": 2});
                jobs
            },
            "jobs.stream.replicas must be 1, 3 or 5",
        ),
        (
            {
                let mut jobs = jobs();
                jobs["objects"]["gcs"] =
                    json!({"serviceAccountSecretRef": {"name": "gcs", "key": "key.json"}});
                jobs
            },
            "jobs.objects needs exactly one store: endpoint (S3), gcs or azure",
        ),
        (
            {
                let mut jobs = jobs();
                jobs["objects"].as_object_mut().unwrap().remove("endpoint");
                jobs["objects"]["azure"] = json!({"account": "shop",
                    "accessKeySecretRef": {"name": "azure", "key": "key"}});
                jobs
            },
            "jobs.objects.endpoint (S3) and jobs.objects.credentialsSecretRef go together",
        ),
    ]) {
        let refused =
            kubectl_apply(cluster, ns.name(), &pool_manifest("refused", spec(jobs.clone())))
                .expect_err(&jobs.to_string());
        assert!(refused.contains(says), "{jobs}: {refused}");
    }
}
