//! Names, labels and the parts both components share (metadata, Service, PDB, security).

use crate::crd::{RenderPoolSpec, RolloutSpec};
use k8s_openapi::api::apps::v1::{DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::api::core::v1::{
    Capabilities, ContainerPort, EmptyDirVolumeSource, EnvVar, HTTPGetAction, KeyToPath, Lifecycle,
    LifecycleHandler, PodSecurityContext, PodSpec, Probe, ResourceRequirements, SeccompProfile,
    SecretVolumeSource, SecurityContext, Service, ServicePort, ServiceSpec, SleepAction,
    TopologySpreadConstraint, Volume, VolumeMount,
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

/// Name of a component's Deployment, Service and PDB: `<pool>-render`, `<pool>-gotenberg`
/// (the Gotenberg NetworkPolicy too).
pub fn child_name(pool: &str, component: Component) -> String {
    format!("{pool}-{}", component.as_str())
}

/// Name of the ConfigMap holding each render pod's Office share: `<pool>-office`.
pub fn office_share_name(pool: &str) -> String {
    format!("{pool}-office")
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
        self.named(component, child_name(&self.pool, component))
    }

    /// Metadata of a component's object called `name`, owned by the pool.
    pub fn named(&self, component: Component, name: String) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
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

/// The rolling update of a component's Deployment, from spec.rollout (by default a surge pod
/// first, so capacity never drops).
pub fn strategy(rollout: RolloutSpec) -> DeploymentStrategy {
    DeploymentStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDeployment {
            max_surge: Some(IntOrString::Int(rollout.max_surge)),
            max_unavailable: Some(IntOrString::Int(rollout.max_unavailable)),
        }),
    }
}

/// Pod annotations: node autoscalers may evict these pods (their emptyDirs hold nothing
/// durable, and their drain finishes or hands back admitted work), unless `do_not_disrupt`.
pub fn pod_annotations(do_not_disrupt: bool) -> BTreeMap<String, String> {
    let mut annotations = BTreeMap::from([(
        "cluster-autoscaler.kubernetes.io/safe-to-evict".to_string(),
        (!do_not_disrupt).to_string(),
    )]);
    if do_not_disrupt {
        annotations.insert("karpenter.sh/do-not-disrupt".into(), "true".into());
    }
    annotations
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

/// Owner and group may read a mounted Secret's files; the pod's fsGroup is its user's group.
const SECRET_MODE: i32 = 0o440;

/// Keys of the Secret `secret` as files in the read-only folder `folder` (each `(key, file
/// name)`), through the volume `volume`. The whole folder is mounted, not a subPath, so the
/// kubelet's updates of a changed Secret reach the pod; a missing Secret or key keeps the pod in
/// ContainerCreating rather than starting it without.
pub fn secret_files(
    volume: &str,
    secret: &str,
    items: &[(&str, &str)],
    folder: &str,
) -> (Volume, VolumeMount) {
    let items = items
        .iter()
        .map(|(key, path)| KeyToPath {
            key: (*key).into(),
            path: (*path).into(),
            ..KeyToPath::default()
        })
        .collect();
    let source = SecretVolumeSource {
        secret_name: Some(secret.into()),
        items: Some(items),
        default_mode: Some(SECRET_MODE),
        optional: Some(false),
        ..SecretVolumeSource::default()
    };
    let volume_spec = Volume { name: volume.into(), secret: Some(source), ..Volume::default() };
    (volume_spec, read_only_mount(volume, folder))
}

/// The volume `volume` mounted whole and read-only at `folder`.
pub fn read_only_mount(volume: &str, folder: &str) -> VolumeMount {
    VolumeMount {
        name: volume.into(),
        mount_path: folder.into(),
        read_only: Some(true),
        ..VolumeMount::default()
    }
}

/// Where a writable /tmp under a read-only root lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scratch {
    /// tmpfs: counts against the pod's memory limit (small, fast scratch).
    Memory,
    /// The node's disk: counts against ephemeral storage instead.
    Disk,
}

/// A writable /tmp under a read-only root, size-limited so it cannot fill memory or the node's
/// disk unnoticed.
pub fn tmp_volume(size: String, scratch: Scratch) -> (Volume, VolumeMount) {
    let volume = Volume {
        name: "tmp".into(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: (scratch == Scratch::Memory).then(|| "Memory".into()),
            size_limit: Some(Quantity(size)),
            ..EmptyDirVolumeSource::default()
        }),
        ..Volume::default()
    };
    let mount =
        VolumeMount { name: "tmp".into(), mount_path: "/tmp".into(), ..VolumeMount::default() };
    (volume, mount)
}

/// A byte count as the quantity the API server stores for it: whole MiB (rounded up), or GiB
/// when exact, so the stored form equals the built one.
pub fn mebibytes(bytes: u64) -> String {
    let mib = bytes.div_ceil(renderpool_sizing::MIB);
    if mib.is_multiple_of(1024) { format!("{}Gi", mib / 1024) } else { format!("{mib}Mi") }
}

/// The preStop sleep; none at all for 0 seconds (a zero sleep is refused before Kubernetes 1.33).
pub fn pre_stop(seconds: i64) -> Option<Lifecycle> {
    (seconds > 0).then(|| Lifecycle {
        pre_stop: Some(LifecycleHandler {
            sleep: Some(SleepAction { seconds }),
            ..LifecycleHandler::default()
        }),
        ..Lifecycle::default()
    })
}

/// The spec's placement (node selector, tolerations, affinity, spread, priority) on a pod of
/// `component`; without a spread in the spec, the pods of each component spread across nodes.
pub fn place(pod: &mut PodSpec, spec: &RenderPoolSpec, pool: &str, component: Component) {
    pod.node_selector = spec.node_selector.clone();
    pod.tolerations = spec.tolerations.clone();
    pod.affinity = spec.affinity.clone();
    pod.priority_class_name = spec.priority_class_name.clone();
    pod.topology_spread_constraints = Some(
        spec.topology_spread_constraints.clone().unwrap_or_else(|| default_spread(pool, component)),
    );
}

fn default_spread(pool: &str, component: Component) -> Vec<TopologySpreadConstraint> {
    vec![TopologySpreadConstraint {
        max_skew: 1,
        topology_key: "kubernetes.io/hostname".into(),
        when_unsatisfiable: "ScheduleAnyway".into(),
        label_selector: Some(LabelSelector {
            match_labels: Some(selector_labels(pool, component)),
            ..LabelSelector::default()
        }),
        ..TopologySpreadConstraint::default()
    }]
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
