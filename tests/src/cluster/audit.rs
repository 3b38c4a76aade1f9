//! The API server's audit log of the writes made by workloads' ServiceAccounts (the operator's
//! among them): one client's writes to one namespace, in the API server's own account, which the
//! controller-manager's status updates of the same objects never blur.

use std::path::{Path, PathBuf};

use super::ClusterError;

/// What is logged: every write by a ServiceAccount, except the controller-manager's controllers
/// (ServiceAccounts in `kube-system`), at the Metadata level (who, what, which object, the code).
const POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: None
    userGroups: ["system:serviceaccounts:kube-system"]
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
    verbs: ["create", "update", "patch", "delete", "deletecollection"]
  - level: None
"#;

/// Writes the policy into `state_dir`; returns the API server's audit flags.
pub(super) fn apiserver_flags(state_dir: &Path) -> Result<Vec<String>, ClusterError> {
    let policy = state_dir.join("audit-policy.yaml");
    std::fs::write(&policy, POLICY)?;
    Ok(vec![
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", log_path(state_dir).display()),
        "--audit-log-format=json".into(),
        // Each event is written before the request's handler returns.
        "--audit-log-mode=blocking".into(),
    ])
}

/// Where the API server writes the log.
pub(super) fn log_path(state_dir: &Path) -> PathBuf {
    state_dir.join("audit.log")
}

/// One write the API server answered, as its audit log records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// `create`, `patch`, `update`, `delete`, ...
    pub verb: String,
    /// The resource, plural (`deployments`, `renderpools`, `events`).
    pub resource: String,
    /// `status`, `scale`, ... or empty.
    pub subresource: String,
    /// The object's name (empty for a create whose name the server chose).
    pub name: String,
    /// The HTTP status the API server answered.
    pub code: u16,
}

/// The writes by `user` in `namespace`, in the order the API server answered them.
pub(super) fn writes(log: &str, user: &str, namespace: &str) -> Vec<Write> {
    log.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event["user"]["username"] == user)
        .filter(|event| event["objectRef"]["namespace"] == namespace)
        .map(|event| {
            let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
            let object = &event["objectRef"];
            Write {
                verb: text(&event["verb"]),
                resource: text(&object["resource"]),
                subresource: text(&object["subresource"]),
                name: text(&object["name"]),
                code: event["responseStatus"]["code"]
                    .as_u64()
                    .and_then(|c| u16::try_from(c).ok())
                    .unwrap_or(0),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_one_users_writes_in_one_namespace() {
        let line = |user: &str, ns: &str, resource: &str, sub: &str| {
            serde_json::json!({
                "kind": "Event", "stage": "ResponseComplete", "verb": "patch",
                "user": {"username": user},
                "objectRef": {"resource": resource, "namespace": ns, "name": "calm",
                              "subresource": sub},
                "responseStatus": {"code": 200},
            })
            .to_string()
        };
        let op = "system:serviceaccount:renderpool-system:renderpool-operator";
        let log = [
            line(op, "a", "renderpools", "status"),
            line(op, "b", "deployments", ""),
            line("system:serviceaccount:x:y", "a", "deployments", ""),
            "not json".into(),
        ]
        .join("\n");
        let writes = writes(&log, op, "a");
        let want = Write {
            verb: "patch".into(),
            resource: "renderpools".into(),
            subresource: "status".into(),
            name: "calm".into(),
            code: 200,
        };
        assert_eq!(writes, [want]);
    }
}
