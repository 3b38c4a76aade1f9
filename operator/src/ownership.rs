//! Whose is an object under a child's name: the pure decision that keeps the operator from
//! taking over (and later garbage-collecting) an object a person or another controller made.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Who holds a child's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// No object has the name: the operator may create it.
    Free,
    /// The object names this pool among its owners: the operator keeps it.
    Ours,
    /// Someone else's (no owner reference to this pool, even if it carries the operator's
    /// labels, such as children a deleted pool of the same name left behind): left untouched.
    Theirs,
}

/// The claim on a child's name, from the object found under it (if any) and the pool's uid.
pub fn claim(existing: Option<&ObjectMeta>, pool_uid: &str) -> Claim {
    match existing {
        None => Claim::Free,
        Some(meta) if owned_by(meta, pool_uid) => Claim::Ours,
        Some(_) => Claim::Theirs,
    }
}

/// True when `meta` has an owner reference to the object with uid `owner_uid`.
pub fn owned_by(meta: &ObjectMeta, owner_uid: &str) -> bool {
    meta.owner_references.iter().flatten().any(|o| o.uid == owner_uid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use std::collections::BTreeMap;

    fn owned(uids: &[&str]) -> ObjectMeta {
        ObjectMeta {
            name: Some("docs-render".into()),
            owner_references: Some(
                uids.iter()
                    .map(|uid| OwnerReference {
                        api_version: "renderpool.dev/v1beta1".into(),
                        kind: "RenderPool".into(),
                        name: "docs".into(),
                        uid: (*uid).into(),
                        ..OwnerReference::default()
                    })
                    .collect(),
            ),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn an_absent_name_is_free_and_one_owned_by_the_pool_is_ours() {
        assert_eq!(claim(None, "uid-1"), Claim::Free);
        assert_eq!(claim(Some(&owned(&["uid-1"])), "uid-1"), Claim::Ours);
        // Another owner beside the pool (a person added one) does not make it theirs.
        assert_eq!(claim(Some(&owned(&["other", "uid-1"])), "uid-1"), Claim::Ours);
    }

    #[test]
    fn an_object_without_the_pools_uid_is_theirs_whatever_its_labels_or_owners_name() {
        // Made by a person: no owner at all.
        assert_eq!(claim(Some(&ObjectMeta::default()), "uid-1"), Claim::Theirs);
        // Left by a deleted pool of the same name and kind: the uid is what counts.
        let mut leftover = owned(&["uid-0"]);
        leftover.labels = Some(BTreeMap::from([(
            "app.kubernetes.io/managed-by".to_string(),
            "renderpool-operator".to_string(),
        )]));
        assert_eq!(claim(Some(&leftover), "uid-1"), Claim::Theirs);
        assert_eq!(claim(Some(&owned(&[])), "uid-1"), Claim::Theirs);
    }
}
