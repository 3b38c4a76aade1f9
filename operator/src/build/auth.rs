//! The `spec.auth` token in the render pods: its Secret key mounted read-only as a file, and the
//! variable that tells the pod where it is (the pod checks `/v1/*` requests against it).

use super::common::{env, secret_files};
use crate::crd::AuthSpec;
use k8s_openapi::api::core::v1::{EnvVar, Volume, VolumeMount};
use renderpool_api::render_pod::env as var;

/// Folder the token's Secret is mounted at in render pods.
const AUTH_MOUNT: &str = "/etc/renderpool/auth";
/// File name of the token in [`AUTH_MOUNT`].
const TOKEN_FILE: &str = "token";
/// Name of the volume in the render pod template.
const VOLUME: &str = "auth-token";

/// The token's volume, its read-only mount and the variable naming the file, for `spec.auth`.
pub(super) fn token(auth: &AuthSpec) -> (Volume, VolumeMount, EnvVar) {
    let secret = &auth.token_secret_ref;
    let (volume, mount) =
        secret_files(VOLUME, &secret.name, &[(&secret.key, TOKEN_FILE)], AUTH_MOUNT);
    (volume, mount, env(var::AUTH_TOKEN_FILE, format!("{AUTH_MOUNT}/{TOKEN_FILE}")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use crate::build::tests::children;
    use std::collections::BTreeMap;

    #[test]
    fn the_token_is_mounted_read_only_from_the_secret_key_and_named_to_the_pod() {
        let c = children("auth:\n  tokenSecretRef: {name: docs-token, key: bearer}");
        let pod = c.render.deployment.spec.template.spec.unwrap();
        let volume = pod.volumes.unwrap().into_iter().find(|v| v.name == "auth-token").unwrap();
        let secret = volume.secret.unwrap();
        assert_eq!(secret.secret_name.as_deref(), Some("docs-token"));
        let items = secret.items.unwrap();
        assert_eq!((items[0].key.as_str(), items[0].path.as_str()), ("bearer", "token"));
        assert_eq!(secret.optional, Some(false));
        let container = &pod.containers[0];
        let mount = container.volume_mounts.as_ref().unwrap();
        let mount = mount.iter().find(|m| m.name == "auth-token").unwrap();
        assert_eq!(
            (mount.mount_path.as_str(), mount.read_only),
            ("/etc/renderpool/auth", Some(true))
        );
        assert_eq!(mount.sub_path, None, "a subPath mount would never see a rotated Secret");
        let env: BTreeMap<_, _> = container
            .env
            .clone()
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.value.unwrap_or_default()))
            .collect();
        assert_eq!(env["RENDERPOD_AUTH_TOKEN_FILE"], "/etc/renderpool/auth/token");
        // Without auth: no volume, no variable.
        let open = children("{}").render.deployment.spec.template.spec.unwrap();
        assert!(open.volumes.unwrap().iter().all(|v| v.secret.is_none()));
        assert!(open.containers[0].env.as_ref().unwrap().iter().all(|e| !e.name.contains("AUTH")));
    }
}
