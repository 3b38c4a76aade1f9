//! Is a child, as the watch cache last saw it, already what this manager would apply?
//!
//! Two comparisons, both pure: every field the built object sets has that value in the cached
//! one (so a `kubectl edit`, `kubectl scale` or a webhook that changed one of them is seen), and
//! every field the manager owns, by the object's managedFields, is still set by the built object
//! (so a field the operator stopped setting is removed by the next apply). When both hold, a
//! server-side apply would change nothing and is skipped; when in doubt (a list another manager
//! added to, a quantity in another notation) the answer is "apply", which the API server turns
//! into a no-op that bumps no resourceVersion. Correctness never rests on the skip.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use renderpool_sizing::{parse_cpu_millis, parse_memory_bytes};
use serde::Serialize;
use serde_json::Value;

/// True when applying `desired` with field manager `manager` over `existing` would change
/// nothing.
pub fn converged<K: Resource + Serialize>(existing: &K, desired: &K, manager: &str) -> bool {
    if existing.meta().deletion_timestamp.is_some() {
        return false;
    }
    let (Ok(have), Ok(want)) = (serde_json::to_value(existing), serde_json::to_value(desired))
    else {
        return false;
    };
    contains(&have, &want, None)
        && owned_fields(existing.meta(), manager).is_some_and(|owned| owned_within(owned, &want))
}

/// The fields `manager` set by server-side apply on the object itself (not a subresource).
fn owned_fields<'a>(meta: &'a ObjectMeta, manager: &str) -> Option<&'a Value> {
    meta.managed_fields.as_ref()?.iter().find_map(|entry| {
        let ours = entry.manager.as_deref() == Some(manager)
            && entry.operation.as_deref() == Some("Apply")
            && entry.subresource.as_deref().unwrap_or("").is_empty();
        ours.then(|| entry.fields_v1.as_ref().map(|f| &f.0)).flatten()
    })
}

/// Every value `want` sets is in `have`. Lists must match item by item; a missing key is fine
/// only where `want` asks for nothing (null, `{}`, `[]`), which the API server drops.
fn contains(have: &Value, want: &Value, key: Option<&str>) -> bool {
    match (have, want) {
        (_, Value::Null) => true,
        (Value::Object(have), Value::Object(want)) => want.iter().all(|(k, w)| match have.get(k) {
            Some(h) => contains(h, w, Some(k)),
            None => is_empty(w),
        }),
        (Value::Array(have), Value::Array(want)) => {
            have.len() == want.len() && have.iter().zip(want).all(|(h, w)| contains(h, w, None))
        }
        (Value::String(have), Value::String(want)) => {
            have == want || same_quantity(key, have, want)
        }
        _ => have == want,
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}

/// The API server stores quantities in canonical form ("0.5" becomes "500m", "1024Mi" "1Gi"):
/// under the keys that hold quantities, equal amounts are equal.
fn same_quantity(key: Option<&str>, have: &str, want: &str) -> bool {
    match key {
        Some("cpu") => {
            matches!((parse_cpu_millis(have), parse_cpu_millis(want)), (Ok(a), Ok(b)) if a == b)
        }
        Some("memory" | "ephemeral-storage" | "sizeLimit") => {
            matches!((parse_memory_bytes(have), parse_memory_bytes(want)), (Ok(a), Ok(b)) if a == b)
        }
        _ => false,
    }
}

/// Every field in the managedFields set `owned` (a FieldsV1 trie) still exists in `want`.
fn owned_within(owned: &Value, want: &Value) -> bool {
    let Value::Object(fields) = owned else {
        return true;
    };
    fields.iter().all(|(key, below)| {
        // "." marks the node itself, which exists since its parent resolved.
        key == "." || resolve(key, want).is_some_and(|child| owned_within(below, child))
    })
}

/// The part of `want` a FieldsV1 key names: `f:<field>`, `k:<list item keys>`, `v:<list item
/// value>` or `i:<list index>`.
fn resolve<'a>(key: &str, want: &'a Value) -> Option<&'a Value> {
    if let Some(field) = key.strip_prefix("f:") {
        return want.as_object()?.get(field).filter(|v| !v.is_null());
    }
    let items = want.as_array()?;
    if let Some(keys) = key.strip_prefix("k:") {
        let keys: serde_json::Map<String, Value> = serde_json::from_str(keys).ok()?;
        return items.iter().find(|item| keys.iter().all(|(k, v)| item.get(k) == Some(v)));
    }
    if let Some(value) = key.strip_prefix("v:") {
        let value: Value = serde_json::from_str(value).ok()?;
        return items.iter().find(|item| **item == value);
    }
    items.get(key.strip_prefix("i:")?.parse::<usize>().ok()?)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
    use serde_json::json;

    const MANAGER: &str = "renderpool-operator";

    fn desired() -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "p-render", "namespace": "docs", "labels": {"app": "p"}},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "p"}},
                "template": {
                    "metadata": {"labels": {"app": "p"}},
                    "spec": {"containers": [{
                        "name": "render-pod",
                        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                        "resources": {"limits": {"cpu": "0.5", "memory": "1024Mi"}}
                    }]}
                }
            }
        }))
        .unwrap()
    }

    /// What the API server would hold after applying `desired`: defaults filled in, quantities
    /// canonical, and the fields the manager owns recorded.
    fn stored() -> Deployment {
        let mut d = desired();
        let value = serde_json::to_value(&d).unwrap();
        let mut stored = value.clone();
        stored["spec"]["strategy"] = json!({"type": "RollingUpdate"});
        stored["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] =
            json!({"cpu": "500m", "memory": "1Gi"});
        stored["spec"]["template"]["spec"]["containers"][0]["terminationMessagePath"] =
            json!("/dev/termination-log");
        stored["status"] = json!({"replicas": 2, "readyReplicas": 2});
        d = serde_json::from_value(stored).unwrap();
        d.metadata.resource_version = Some("42".into());
        d.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some(MANAGER.into()),
            operation: Some("Apply".into()),
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(FieldsV1(json!({
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {
                    "f:replicas": {},
                    "f:selector": {},
                    "f:template": {
                        "f:metadata": {"f:labels": {"f:app": {}}},
                        "f:spec": {"f:containers": {"k:{\"name\":\"render-pod\"}": {
                            ".": {},
                            "f:name": {},
                            "f:env": {
                                "k:{\"name\":\"A\"}": {".": {}, "f:name": {}, "f:value": {}},
                                "k:{\"name\":\"B\"}": {".": {}, "f:name": {}, "f:value": {}}
                            },
                            "f:resources": {"f:limits": {"f:cpu": {}, "f:memory": {}}}
                        }}}
                    }
                }
            }))),
            ..ManagedFieldsEntry::default()
        }]);
        d
    }

    fn container(d: &mut Deployment) -> &mut k8s_openapi::api::core::v1::Container {
        &mut d.spec.template.spec.as_mut().unwrap().containers[0]
    }

    #[test]
    fn what_the_server_stored_from_the_same_build_is_converged() {
        assert!(converged(&stored(), &desired(), MANAGER));
    }

    #[test]
    fn an_edited_field_is_drift() {
        let mut scaled = stored();
        scaled.spec.replicas = Some(7);
        assert!(!converged(&scaled, &desired(), MANAGER));
        let mut edited = stored();
        container(&mut edited).env.as_mut().unwrap()[1].value = Some("9".into());
        assert!(!converged(&edited, &desired(), MANAGER));
        let mut resized = stored();
        let limits = container(&mut resized).resources.as_mut().unwrap().limits.as_mut().unwrap();
        limits.insert(
            "cpu".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("1".into()),
        );
        assert!(!converged(&resized, &desired(), MANAGER));
    }

    #[test]
    fn a_field_the_build_no_longer_sets_must_be_applied_away() {
        let mut unlabelled = desired();
        unlabelled.metadata.labels = None;
        let have = serde_json::to_value(stored()).unwrap();
        let want = serde_json::to_value(&unlabelled).unwrap();
        // Every value built is stored, but the stored label is this manager's and no longer built.
        assert!(contains(&have, &want, None));
        assert!(!converged(&stored(), &unlabelled, MANAGER));
        let mut fewer = stored();
        container(&mut fewer).env.as_mut().unwrap().pop();
        assert!(!converged(&fewer, &desired(), MANAGER), "B is built but missing");
    }

    #[test]
    fn without_this_managers_record_or_while_deleting_it_applies() {
        let mut foreign = stored();
        foreign.metadata.managed_fields.as_mut().unwrap()[0].manager = Some("kubectl".into());
        assert!(!converged(&foreign, &desired(), MANAGER));
        let mut deleting = stored();
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert!(!converged(&deleting, &desired(), MANAGER));
    }

    #[test]
    fn list_items_resolve_by_keys_values_and_indexes() {
        let want = json!({"items": [{"name": "a", "port": 1}, "x"], "drop": ["ALL"]});
        assert!(resolve("f:items", &want).is_some());
        assert!(resolve("k:{\"name\":\"a\",\"port\":1}", &want["items"]).is_some());
        assert!(resolve("k:{\"name\":\"a\",\"port\":2}", &want["items"]).is_none());
        assert!(resolve("v:\"ALL\"", &want["drop"]).is_some());
        assert!(resolve("i:1", &want["items"]).is_some());
        assert!(resolve("i:2", &want["items"]).is_none());
        assert!(resolve("f:missing", &want).is_none());
        assert!(resolve("q:unknown", &want).is_none());
    }

    #[test]
    fn empty_asks_match_missing_and_quantities_match_by_amount() {
        assert!(contains(&json!({"a": 1}), &json!({"a": 1, "b": {}, "c": [], "d": null}), None));
        assert!(!contains(&json!({"a": 1}), &json!({"b": false}), None));
        assert!(contains(&json!({"memory": "1Gi"}), &json!({"memory": "1024Mi"}), None));
        assert!(contains(&json!({"sizeLimit": "1G"}), &json!({"sizeLimit": "1e9"}), None));
        // Outside a quantity key, strings compare as written.
        assert!(!contains(&json!({"value": "1Gi"}), &json!({"value": "1024Mi"}), None));
        // A list another manager added to is applied again (a no-op on the server).
        assert!(!contains(&json!([1, 2, 3]), &json!([1, 2]), None));
    }
}
