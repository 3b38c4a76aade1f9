//! Who may call the render pods: the NetworkPolicy `<pool>-render` that admits only
//! `spec.clients` (and `spec.scrapers`) to their port.
//!
//! A NetworkPolicy selects by the port and not by the path, and `/metrics` shares the API's
//! port: a scraper admitted here reaches the `/v1` routes too, which the token then guards. The
//! kubelet's probes come from the node, which NetworkPolicies always admit.

use super::common::{Component, Meta, selector_labels};
use super::render::RENDER_PORT;
use crate::crd::{PeerSelector, RenderPoolSpec};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The NetworkPolicy admitting only the clients and scrapers to the render pods' port, when
/// `spec.clients` is set. Ingress only: the render pods still reach Gotenberg and DNS.
pub(super) fn render_policy(meta: &Meta, spec: &RenderPoolSpec) -> Option<NetworkPolicy> {
    let clients = spec.clients.as_ref()?;
    let rule = |peers: &[PeerSelector]| NetworkPolicyIngressRule {
        from: Some(peers.iter().map(peer).collect()),
        ports: Some(vec![NetworkPolicyPort {
            port: Some(IntOrString::Int(RENDER_PORT)),
            protocol: Some("TCP".into()),
            ..NetworkPolicyPort::default()
        }]),
    };
    let mut ingress = vec![rule(clients)];
    // An empty list would be a rule admitting every pod: no scrapers is no rule.
    if let Some(scrapers) = spec.scrapers.as_deref().filter(|s| !s.is_empty()) {
        ingress.push(rule(scrapers));
    }
    Some(NetworkPolicy {
        metadata: meta.object(Component::Render),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(selector_labels(&meta.pool, Component::Render)),
                ..LabelSelector::default()
            }),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(ingress),
            egress: None,
        }),
    })
}

fn peer(selector: &PeerSelector) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        pod_selector: selector.pod_selector.clone(),
        namespace_selector: selector.namespace_selector.clone(),
        ip_block: None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use crate::build::tests::children;
    use crate::build::{Component, selector_labels};
    use k8s_openapi::api::networking::v1::NetworkPolicyPeer;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    fn labels(pairs: &[(&str, &str)]) -> Option<LabelSelector> {
        let map = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Some(LabelSelector { match_labels: Some(map), match_expressions: None })
    }

    #[test]
    fn no_clients_no_policy() {
        assert!(children("{}").render_policy.is_none());
    }

    #[test]
    fn the_policy_admits_each_client_and_scraper_as_written_to_the_render_port_only() {
        let c = children(
            "clients:\n\
             - podSelector: {matchLabels: {app: web}}\n\
             - namespaceSelector: {matchLabels: {team: billing}}\n  \
               podSelector: {matchExpressions: [{key: tier, operator: In, values: [api]}]}\n\
             scrapers:\n\
             - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}",
        );
        let policy = c.render_policy.unwrap();
        assert_eq!(policy.metadata.name.as_deref(), Some("docs-render"));
        assert_eq!(policy.metadata.namespace.as_deref(), Some("docs"));
        let owner = &policy.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.controller), ("RenderPool", Some(true)));
        let spec = policy.spec.unwrap();
        // The render pods exactly: the Deployment's own selector.
        let selected = spec.pod_selector.unwrap();
        assert_eq!(
            selected.match_labels.as_ref(),
            c.render.deployment.spec.selector.match_labels.as_ref()
        );
        assert_eq!(selected.match_labels.unwrap(), selector_labels("docs", Component::Render));
        // Ingress only: the render pods still reach Gotenberg and DNS.
        assert_eq!(spec.policy_types.unwrap(), ["Ingress"]);
        assert_eq!(spec.egress, None);
        let rules = spec.ingress.unwrap();
        assert_eq!(rules.len(), 2);
        let clients = rules[0].from.clone().unwrap();
        assert_eq!(
            clients,
            [
                NetworkPolicyPeer { pod_selector: labels(&[("app", "web")]), ..Default::default() },
                NetworkPolicyPeer {
                    namespace_selector: labels(&[("team", "billing")]),
                    pod_selector: Some(LabelSelector {
                        match_labels: None,
                        match_expressions: Some(vec![LabelSelectorRequirement {
                            key: "tier".into(),
                            operator: "In".into(),
                            values: Some(vec!["api".into()]),
                        }]),
                    }),
                    ip_block: None,
                },
            ]
        );
        let scrapers = rules[1].from.clone().unwrap();
        assert_eq!(
            scrapers,
            [NetworkPolicyPeer {
                namespace_selector: labels(&[("kubernetes.io/metadata.name", "monitoring")]),
                ..Default::default()
            }]
        );
        for rule in &rules {
            let ports = rule.ports.clone().unwrap();
            assert_eq!(ports.len(), 1);
            assert_eq!(ports[0].port, Some(IntOrString::Int(8080)));
            assert_eq!(ports[0].protocol.as_deref(), Some("TCP"));
            assert_eq!(ports[0].end_port, None);
            assert!(!rule.from.as_ref().unwrap().is_empty(), "an empty from admits every pod");
        }
        // The port the Service sends to.
        let service = c.render.service.spec.unwrap();
        assert_eq!(service.ports.unwrap()[0].port, 8080);
    }

    #[test]
    fn without_scrapers_only_the_clients_rule_is_written() {
        for spec in ["clients:\n- podSelector: {}", "clients:\n- podSelector: {}\nscrapers: []"] {
            let rules = children(spec).render_policy.unwrap().spec.unwrap().ingress.unwrap();
            assert_eq!(rules.len(), 1, "{spec}");
            assert_eq!(
                rules[0].from.clone().unwrap()[0].pod_selector,
                Some(LabelSelector::default())
            );
        }
    }
}
