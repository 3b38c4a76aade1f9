//! Names, labels and the parts both components share (metadata, Service, PDB, security).

use k8s_openapi::api::core::v1::{
    Capabilities, ContainerPort, EmptyDirVolumeSource, EnvVar, HTTPGetAction, PodSecurityContext,
    Probe, ResourceRequirements, SeccompProfile, SecurityContext, Service, ServicePort,
    ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

/// The two kinds of pods a RenderPool runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Component {
    /// render-pod: PDFium slots.
    Render,
    /// Gotenberg: LibreOffice for Office to PDF.
    Gotenberg,
}

impl Component {
    /// Label value and name suffix.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Render => "render",
            Self::Gotenberg => "gotenberg",
        }
    }
}

/// Name of a component's Deployment, Service and PDB: `<pool>-render`, `<pool>-gotenberg`.
pub fn child_name(pool: &str, component: Component) -> String {
    format!("{pool}-{}", component.as_str())
}

/// Labels that select a component's pods; stable, because a Deployment's selector is immutable.
pub fn selector_labels(pool: &str, component: Component) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), "renderpool".to_string()),
        ("app.kubernetes.io/instance".to_string(), pool.to_string()),
        ("app.kubernetes.io/component".to_string(), component.as_str().to_string()),
    ])
}

/// The selector as the string `/scale` and HPAs read (`k=v,k=v`, sorted).
pub fn selector_string(pool: &str, component: Component) -> String {
    selector_labels(pool, component)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// What every child's metadata is made from.
pub(super) struct Meta {
    pub pool: String,
    pub namespace: String,
    pub owner: OwnerReference,
}

impl Meta {
    /// Labels on every object and pod of a component: the selector plus who manages it.
    pub fn labels(&self, component: Component) -> BTreeMap<String, String> {
        let mut labels = selector_labels(&self.pool, component);
        labels.insert("app.kubernetes.io/managed-by".into(), "renderpool-operator".into());
        labels
    }

    /// Metadata of a component's Deployment, Service or PDB, owned by the pool.
    pub fn object(&self, component: Component) -> ObjectMeta {
        ObjectMeta {
            name: Some(child_name(&self.pool, component)),
            namespace: Some(self.namespace.clone()),
            labels: Some(self.labels(component)),
            owner_references: Some(vec![self.owner.clone()]),
            ..ObjectMeta::default()
        }
    }

    /// ClusterIP Service in front of a component's `http` port.
    pub fn service(&self, component: Component, port: i32) -> Service {
        Service {
            metadata: self.object(component),
            spec: Some(ServiceSpec {
                selector: Some(selector_labels(&self.pool, component)),
                ports: Some(vec![ServicePort {
                    name: Some("http".into()),
                    port,
                    target_port: Some(IntOrString::String("http".into())),
                    protocol: Some("TCP".into()),
                    ..ServicePort::default()
                }]),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        }
    }

    /// One voluntary eviction at a time: drains and cluster autoscalers proceed, never all at once.
    pub fn pdb(&self, component: Component) -> PodDisruptionBudget {
        PodDisruptionBudget {
            metadata: self.object(component),
            spec: Some(PodDisruptionBudgetSpec {
                max_unavailable: Some(IntOrString::Int(1)),
                selector: Some(LabelSelector {
                    match_labels: Some(selector_labels(&self.pool, component)),
                    ..LabelSelector::default()
                }),
                ..PodDisruptionBudgetSpec::default()
            }),
            ..PodDisruptionBudget::default()
        }
    }
}

/// Pod annotations: cluster-autoscaler may evict these pods (their emptyDirs hold nothing durable).
pub fn pod_annotations() -> BTreeMap<String, String> {
    BTreeMap::from([(
        "cluster-autoscaler.kubernetes.io/safe-to-evict".to_string(),
        "true".to_string(),
    )])
}

/// Pod-level part of the restricted Pod Security Standard.
pub fn pod_security(user: i64) -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(user),
        run_as_group: Some(user),
        fs_group: Some(user),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..SeccompProfile::default()
        }),
        ..PodSecurityContext::default()
    }
}

/// Container-level part of the restricted Pod Security Standard.
pub fn container_security(read_only_root: bool) -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        privileged: Some(false),
        read_only_root_filesystem: Some(read_only_root),
        run_as_non_root: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            ..Capabilities::default()
        }),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..SeccompProfile::default()
        }),
        ..SecurityContext::default()
    }
}

/// Requests = limits: the Guaranteed QoS class, and the limits the slot formula was fed.
pub fn guaranteed(cpu: &str, memory: &str) -> ResourceRequirements {
    let amounts = BTreeMap::from([
        ("cpu".to_string(), Quantity(cpu.to_string())),
        ("memory".to_string(), Quantity(memory.to_string())),
    ]);
    ResourceRequirements {
        requests: Some(amounts.clone()),
        limits: Some(amounts),
        ..ResourceRequirements::default()
    }
}

/// An HTTP GET probe on the container port named `http`.
pub fn http_probe(path: &str, period: i32, failures: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::String("http".into()),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(period),
        timeout_seconds: Some(2),
        failure_threshold: Some(failures),
        ..Probe::default()
    }
}

/// A plain environment variable.
pub fn env(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar { name: name.into(), value: Some(value.into()), ..EnvVar::default() }
}

/// A writable /tmp under a read-only root, sized so it cannot eat the pod's memory unnoticed.
pub fn tmp_volume(size: &str) -> (Volume, VolumeMount) {
    let volume = Volume {
        name: "tmp".into(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: Some("Memory".into()),
            size_limit: Some(Quantity(size.into())),
            mode: None,
        }),
        ..Volume::default()
    };
    let mount =
        VolumeMount { name: "tmp".into(), mount_path: "/tmp".into(), ..VolumeMount::default() };
    (volume, mount)
}

/// A container port named `http`.
pub fn http_port(port: i32) -> ContainerPort {
    ContainerPort {
        name: Some("http".into()),
        container_port: port,
        protocol: Some("TCP".into()),
        ..ContainerPort::default()
    }
}
