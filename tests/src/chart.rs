//! The Helm chart rendered offline (`helm template`): its documents by kind, the rule file its
//! PrometheusRule holds, and its Grafana dashboard with every panel's queries.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::Value;

use crate::cluster::{Cluster, run};
use crate::repo_root;

/// The chart's folder.
pub fn path() -> PathBuf {
    repo_root().join("charts/renderpool-operator")
}

/// `helm template rp <chart> -n rp-system` with `extra` arguments (`--set`, `--set-json`...).
pub fn template(extra: &[&str]) -> Result<String, String> {
    let mut helm = Cluster::shared().helm();
    helm.args(["template", "rp"]).arg(path()).args(["-n", "rp-system"]).args(extra);
    run(&mut helm).map_err(|err| err.to_string())
}

/// The rendered documents of one kind.
pub fn documents<'a>(rendered: &'a str, kind: &str) -> Vec<&'a str> {
    rendered.split("\n---").filter(|doc| doc.contains(&format!("\nkind: {kind}\n"))).collect()
}

/// The one rendered document of `kind`, parsed.
pub fn document(rendered: &str, kind: &str) -> Result<Value, String> {
    match documents(rendered, kind).as_slice() {
        [one] => serde_saphyr::from_str(one).map_err(|err| format!("{kind}: {err}")),
        other => Err(format!("{} documents of kind {kind}", other.len())),
    }
}

/// The rule file the chart's PrometheusRule holds (its spec, `{"groups": [...]}`: what
/// prometheus-operator hands Prometheus), rendered with `extra` arguments after
/// `prometheusRule.enabled=true`.
pub fn alerting_rules(extra: &[&str]) -> Result<Value, String> {
    let mut args = vec!["--set", "prometheusRule.enabled=true"];
    args.extend_from_slice(extra);
    let rule = document(&template(&args)?, "PrometheusRule")?;
    Ok(rule["spec"].clone())
}

/// The chart's `values.yaml`, parsed.
pub fn values() -> Result<Value, String> {
    let path = path().join("values.yaml");
    let text =
        std::fs::read_to_string(&path).map_err(|err| format!("{}: {err}", path.display()))?;
    serde_saphyr::from_str(&text).map_err(|err| format!("{}: {err}", path.display()))
}

/// `helm template` arguments that shorten every alert's `for:` to `hold` and the rules' rate
/// and average window to `window` (a test's minutes become seconds).
pub fn quick_alerting(window: &str, hold: &str) -> Result<Vec<String>, String> {
    let values = values()?;
    let names = values["prometheusRule"]["for"].as_object().cloned().unwrap_or_default();
    let shortened: serde_json::Map<String, Value> =
        names.keys().map(|name| (name.clone(), Value::from(hold))).collect();
    Ok(vec![
        "--set".into(),
        format!("prometheusRule.window={window}"),
        "--set-json".into(),
        format!("prometheusRule.for={}", Value::Object(shortened)),
    ])
}

/// Every alerting rule of a rule file, as (group name, rule).
pub fn alerts(rules: &Value) -> Vec<(String, Value)> {
    let groups = rules["groups"].as_array().cloned().unwrap_or_default();
    groups
        .into_iter()
        .flat_map(|group| {
            let name = group["name"].as_str().unwrap_or_default().to_string();
            let rules = group["rules"].as_array().cloned().unwrap_or_default();
            rules.into_iter().filter(|r| r.get("alert").is_some()).map(move |r| (name.clone(), r))
        })
        .collect()
}

/// The names of a rule file's alerts.
pub fn alert_names(rules: &Value) -> BTreeSet<String> {
    alerts(rules)
        .iter()
        .filter_map(|(_, rule)| rule["alert"].as_str().map(str::to_string))
        .collect()
}

/// The renderpool metric names a PromQL expression reads (`renderpod_*`,
/// `renderpool_operator_*`).
pub fn metric_names(expr: &str) -> BTreeSet<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| word.starts_with("renderpod_") || word.starts_with("renderpool_operator_"))
        .map(str::to_string)
        .collect()
}

/// The dashboard file: what the chart's ConfigMap carries and what a person imports.
pub fn dashboard_path() -> PathBuf {
    path().join("files/grafana/renderpool.json")
}

/// The dashboard, parsed.
pub fn dashboard() -> Result<Value, String> {
    let path = dashboard_path();
    let text =
        std::fs::read_to_string(&path).map_err(|err| format!("{}: {err}", path.display()))?;
    serde_json::from_str(&text).map_err(|err| format!("{}: {err}", path.display()))
}

/// A dashboard panel as a test reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct DashboardPanel {
    pub title: String,
    /// `timeseries`, `table`...
    pub kind: String,
    /// Grafana's unit of its values (`s`, `percentunit`...).
    pub unit: String,
    /// Its queries: (legend format, expr).
    pub targets: Vec<(String, String)>,
}

/// Every panel with a query (rows' folded panels included), in the dashboard's order.
pub fn panels(dashboard: &Value) -> Vec<DashboardPanel> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let mut found = Vec::new();
    let mut pending: Vec<&Value> =
        dashboard["panels"].as_array().into_iter().flatten().rev().collect();
    while let Some(panel) = pending.pop() {
        pending.extend(panel["panels"].as_array().into_iter().flatten().rev());
        let targets: Vec<(String, String)> = panel["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| (text(&t["legendFormat"]), text(&t["expr"])))
            .collect();
        if !targets.is_empty() {
            found.push(DashboardPanel {
                title: text(&panel["title"]),
                kind: text(&panel["type"]),
                unit: text(&panel["fieldConfig"]["defaults"]["unit"]),
                targets,
            });
        }
    }
    found
}

/// Every query of every panel: (panel title, legend, expr).
pub fn panel_queries(dashboard: &Value) -> Vec<(String, String, String)> {
    panels(dashboard)
        .into_iter()
        .flat_map(|p| {
            p.targets.into_iter().map(move |(legend, expr)| (p.title.clone(), legend, expr))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn alerts_are_the_alerting_rules_of_every_group() {
        let rules = json!({ "groups": [
            { "name": "a", "rules": [{ "alert": "X", "expr": "1" }, { "record": "r", "expr": "1" }] },
            { "name": "b", "rules": [{ "alert": "Y", "expr": "1" }] },
        ]});
        let names: Vec<(String, String)> = alerts(&rules)
            .into_iter()
            .map(|(group, rule)| (group, rule["alert"].as_str().unwrap_or_default().to_string()))
            .collect();
        assert_eq!(names, [("a".into(), "X".into()), ("b".into(), "Y".into())]);
        assert_eq!(alert_names(&rules), BTreeSet::from(["X".into(), "Y".into()]));
    }

    #[test]
    fn metric_names_are_the_renderpool_series_an_expression_reads() {
        let expr = r#"sum by (renderpool) (rate(renderpod_jobs_total{renderpool=~"$pool"}[5m]))
            / on (namespace) renderpool_operator_pool_slots > 0"#;
        let names: Vec<String> = metric_names(expr).into_iter().collect();
        assert_eq!(names, ["renderpod_jobs_total", "renderpool_operator_pool_slots"]);
    }

    #[test]
    fn panel_queries_come_from_rows_and_their_folded_panels() {
        let dashboard = json!({ "panels": [
            { "title": "open", "targets": [{ "expr": "a", "legendFormat": "{{pod}}" }] },
            { "type": "row", "title": "folded", "panels": [
                { "title": "inner", "targets": [{ "expr": "b" }, { "expr": "c" }] },
            ]},
        ]});
        let exprs: Vec<String> =
            panel_queries(&dashboard).into_iter().map(|(_, _, expr)| expr).collect();
        assert_eq!(exprs, ["a", "b", "c"]);
        let titles: Vec<String> = panels(&dashboard).into_iter().map(|p| p.title).collect();
        assert_eq!(titles, ["open", "inner"], "a row without queries is no panel");
    }
}
