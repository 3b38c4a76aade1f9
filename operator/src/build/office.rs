//! The render pods' Office share: how many conversions each may have in flight at once.
//!
//! It depends on the render and Gotenberg replica counts, so it lives in a ConfigMap mounted
//! into the render pods (the kubelet refreshes the file, the pod re-reads it) and never in the
//! pod template: scaling either pool changes the ConfigMap, not the pods.

use super::common::{Component, Meta, office_share_name, read_only_mount};
use k8s_openapi::api::core::v1::{ConfigMap, ConfigMapVolumeSource, Volume, VolumeMount};
use std::collections::BTreeMap;

/// Folder the ConfigMap is mounted at in render pods.
pub const OFFICE_MOUNT: &str = "/etc/renderpool/office";
/// Key (and so file name) holding the share, a decimal integer.
pub const SHARE_KEY: &str = "concurrency";
/// Name of the volume in the render pod template.
const VOLUME: &str = "office";

/// The `<pool>-office` ConfigMap with the share of one render pod.
pub(super) fn share(meta: &Meta, per_pod: u32) -> ConfigMap {
    ConfigMap {
        metadata: meta.named(Component::Render, office_share_name(&meta.pool)),
        data: Some(BTreeMap::from([(SHARE_KEY.to_string(), per_pod.to_string())])),
        ..ConfigMap::default()
    }
}

/// The path render pods read the share from (their `--office-share-file`).
pub fn share_file() -> String {
    format!("{OFFICE_MOUNT}/{SHARE_KEY}")
}

/// The read-only volume and mount that put the share file into a render pod.
pub(super) fn share_volume(pool: &str) -> (Volume, VolumeMount) {
    let volume = Volume {
        name: VOLUME.into(),
        config_map: Some(ConfigMapVolumeSource {
            name: office_share_name(pool),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    };
    (volume, read_only_mount(VOLUME, OFFICE_MOUNT))
}
