//! What each pool's stored status exports as metrics ([`PoolFigures`]): its conditions, the pods
//! it wants and has ready, its slots. Read from the controller's cache of pools at each scrape,
//! so the figures are what `kubectl get rp` shows.

use crate::crd::RenderPool;
use crate::metrics::PoolFigures;
use kube::ResourceExt;
use kube::runtime::reflector::Store;

/// The figures of every pool in `stores`.
pub fn of_stores(stores: &[Store<RenderPool>]) -> Vec<PoolFigures> {
    stores.iter().flat_map(Store::state).map(|pool| of_pool(&pool)).collect()
}

/// The figures of one pool: its conditions as stored, and the counts its status holds (none
/// before the first status is written).
pub fn of_pool(pool: &RenderPool) -> PoolFigures {
    let mut figures = PoolFigures {
        namespace: pool.namespace().unwrap_or_default(),
        name: pool.name_any(),
        ..PoolFigures::default()
    };
    let Some(status) = &pool.status else {
        return figures;
    };
    figures.conditions = status
        .conditions
        .iter()
        .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
        .collect();
    figures.pods = vec![
        ("render", "wanted", i64::from(pool.spec.replicas)),
        ("render", "ready", i64::from(status.ready_replicas)),
    ];
    // Gotenberg's counts are written once the spec is sized (0 wanted when disabled).
    if let (Some(wanted), Some(ready)) =
        (status.gotenberg_replicas, status.gotenberg_ready_replicas)
    {
        figures.pods.push(("gotenberg", "wanted", i64::from(wanted)));
        figures.pods.push(("gotenberg", "ready", i64::from(ready)));
    }
    figures.slots = [("ready", status.ready_slots), ("total", status.total_slots)]
        .into_iter()
        .filter_map(|(state, slots)| slots.map(|s| (state, i64::from(s))))
        .collect();
    figures
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::crd::RenderPoolStatus;
    use crate::test_fixtures::pool_from_yaml;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    fn condition(type_: &str, status: &str, reason: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: "m".into(),
            observed_generation: Some(1),
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        }
    }

    #[test]
    fn a_pool_without_status_exports_only_its_names() {
        let pool = pool_from_yaml("previews", "cpu: 1\nmemory: 1Gi\n");
        let figures = of_pool(&pool);
        assert_eq!((figures.namespace.as_str(), figures.name.as_str()), ("docs", "previews"));
        assert!(figures.conditions.is_empty() && figures.pods.is_empty());
    }

    #[test]
    fn conditions_pods_and_slots_come_from_the_stored_status_and_spec() {
        let mut pool = pool_from_yaml("previews", "replicas: 3\ncpu: 1\nmemory: 1Gi\n");
        pool.status = Some(RenderPoolStatus {
            ready_replicas: 2,
            ready_slots: Some(2),
            total_slots: Some(3),
            gotenberg_replicas: Some(1),
            gotenberg_ready_replicas: Some(0),
            conditions: vec![
                condition("Ready", "False", "PodsNotReady"),
                condition("Degraded", "False", "AsExpected"),
            ],
            ..RenderPoolStatus::default()
        });
        let figures = of_pool(&pool);
        assert_eq!(
            figures.conditions,
            [
                ("Ready".into(), "False".into(), "PodsNotReady".into()),
                ("Degraded".into(), "False".into(), "AsExpected".into())
            ]
        );
        assert_eq!(
            figures.pods,
            [
                ("render", "wanted", 3),
                ("render", "ready", 2),
                ("gotenberg", "wanted", 1),
                ("gotenberg", "ready", 0)
            ]
        );
        assert_eq!(figures.slots, [("ready", 2), ("total", 3)]);
    }
}
