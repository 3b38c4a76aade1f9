//! The chart's alerts and dashboard, rendered: `promtool check rules` on the rule file, what
//! each alert says and where its runbook section is, the dashboard ConfigMap against the file it
//! carries, and the scrape settings the alerts' labels depend on. The real-node test in
//! `autoscaling.rs` fires them on a live Prometheus.

use std::collections::BTreeSet;

use renderpool_operator::metrics::{Metrics, PoolFigures};
use renderpool_tests::chart::{self, document, documents, template};
use renderpool_tests::cluster::metrics::{operator_job, scrape_config_path};
use renderpool_tests::cluster::{Cluster, run};
use renderpool_tests::repo_root;
use serde_json::Value;

/// `promtool <command> rules <file>`; its report.
fn promtool(command: &str, file: &std::path::Path) -> Result<String, String> {
    let mut promtool = std::process::Command::new(Cluster::shared().bin("promtool"));
    promtool.args([command, "rules"]).arg(file);
    run(&mut promtool).map_err(|err| err.to_string())
}

/// `promtool check rules` on `rules` written as a file; its report.
fn promtool_check(rules: &Value) -> Result<String, String> {
    let dir = tempfile::tempdir().map_err(|err| err.to_string())?;
    let file = dir.path().join("renderpool-rules.yaml");
    std::fs::write(&file, rules.to_string()).map_err(|err| err.to_string())?;
    promtool("check", &file)
}

#[test]
fn promtool_passes_the_rule_file_at_the_defaults_and_at_a_tests_short_windows() {
    let defaults = chart::alerting_rules(&[]).unwrap();
    let count = chart::alerts(&defaults).len();
    let report = promtool_check(&defaults).unwrap_or_else(|err| panic!("{err}\n{defaults:#}"));
    assert!(report.contains(&format!("SUCCESS: {count} rules found")), "{report}");
    let quick = chart::quick_alerting("20s", "10s").unwrap();
    let quick: Vec<&str> = quick.iter().map(String::as_str).collect();
    let short = chart::alerting_rules(&quick).unwrap();
    let report = promtool_check(&short).unwrap_or_else(|err| panic!("{err}\n{short:#}"));
    assert!(report.contains(&format!("SUCCESS: {count} rules found")), "{report}");
    for (_, rule) in chart::alerts(&short) {
        assert_eq!(rule["for"], "10s", "{rule}");
        let expr = rule["expr"].as_str().unwrap();
        assert!(!expr.contains("[5m]"), "the window was not shortened: {expr}");
    }
    // promtool refuses what is wrong, so its SUCCESS above means something.
    let mut broken = defaults.clone();
    broken["groups"][0]["rules"][0]["expr"] = "sum by (namespace (renderpod_slots)".into();
    let refused = promtool_check(&broken).unwrap_err();
    assert!(refused.contains("parse error"), "{refused}");
}

/// `promtool test rules`: the job-backlog alert (no real-node fault makes a pool with durable
/// jobs) on series of the oldest job's age from two render pods of one pool, evaluated by
/// Prometheus's own rule engine at the chart's defaults: quiet while the age is under 900 s and
/// through the `for:`, firing with the pool's labels after, gone once the backlog is worked off.
#[test]
fn promtool_fires_the_job_backlog_alert_past_its_age_and_clears_it_when_worked_off() {
    let rules = chart::alerting_rules(&[]).unwrap();
    let runbook =
        chart::values().unwrap()["prometheusRule"]["runbookUrl"].as_str().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.yaml"), rules.to_string()).unwrap();
    let pod = |name: &str| {
        format!(
            "renderpod_jobs_backlog_oldest_seconds{{namespace=\"shop\",renderpool=\"extract\",pod=\"{name}\"}}"
        )
    };
    // The oldest job ages a minute a minute for 30 minutes (past 900 s from minute 16, so
    // firing from minute 21 after the 5m `for:`), then the backlog is empty; the other pod
    // read the stream later, so its figure lags.
    let tests = serde_json::json!({
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [
                { "series": pod("extract-render-a"), "values": "0+60x30 0x20" },
                { "series": pod("extract-render-b"), "values": "0+50x30 0x20" },
            ],
            "alert_rule_test": [
                { "eval_time": "17m", "alertname": "RenderPoolJobBacklogOld", "exp_alerts": [] },
                { "eval_time": "25m", "alertname": "RenderPoolJobBacklogOld", "exp_alerts": [{
                    "exp_labels": { "severity": "warning", "namespace": "shop", "renderpool": "extract" },
                    "exp_annotations": {
                        "summary": "A render pool's durable jobs wait too long.",
                        "description": "The oldest job in the stream of RenderPool extract in shop has waited or run 25m 0s: the pool works off its backlog too slowly, or no pod takes jobs. kubectl get renderpool extract -n shop -o wide shows the backlog.",
                        "runbook_url": format!("{runbook}#renderpooljobbacklogold"),
                    },
                }] },
                { "eval_time": "40m", "alertname": "RenderPoolJobBacklogOld", "exp_alerts": [] },
            ],
        }],
    });
    let file = dir.path().join("backlog-test.yaml");
    std::fs::write(&file, tests.to_string()).unwrap();
    let report = promtool("test", &file).unwrap_or_else(|err| panic!("{err}"));
    assert!(report.contains("SUCCESS"), "{report}");
    // promtool fails a test whose alert does not come as expected, so SUCCESS means it fired.
    let wrong = tests.to_string().replace("\"eval_time\":\"17m\"", "\"eval_time\":\"22m\"");
    std::fs::write(&file, wrong).unwrap();
    assert!(promtool("test", &file).is_err(), "promtool accepted no alert at 22m");
}

#[test]
fn every_alert_has_a_severity_a_summary_a_description_naming_its_pool_and_a_runbook_section() {
    let rules = chart::alerting_rules(&[]).unwrap();
    let runbook = std::fs::read_to_string(repo_root().join("docs/runbook.md")).unwrap();
    let values = chart::values().unwrap();
    let configured: BTreeSet<String> =
        values["prometheusRule"]["for"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        chart::alert_names(&rules),
        configured,
        "every alert has its `for:` value, and no other"
    );
    for (group, rule) in chart::alerts(&rules) {
        let name = rule["alert"].as_str().unwrap();
        let severity = rule["labels"]["severity"].as_str().unwrap_or_default();
        assert!(["warning", "critical"].contains(&severity), "{name}: severity {severity:?}");
        let annotations = &rule["annotations"];
        assert!(annotations["summary"].as_str().is_some_and(|s| s.len() > 10), "{name}");
        let description = annotations["description"].as_str().unwrap_or_default();
        let names = if group == "renderpool.operator" {
            vec!["$labels.pod", "$labels.namespace"]
        } else {
            vec!["$labels.renderpool", "$labels.namespace"]
        };
        for label in names {
            assert!(
                description.contains(label),
                "{name}'s description lacks {label}: {description}"
            );
        }
        let url = annotations["runbook_url"].as_str().unwrap_or_default();
        let anchor = name.to_lowercase();
        assert!(url.ends_with(&format!("runbook.md#{anchor}")), "{name}: {url}");
        assert!(
            runbook.lines().any(|l| l == format!("### {name}")),
            "no `### {name}` in the runbook"
        );
        assert!(runbook.contains(&format!("[{name}](#{anchor})")), "{name} is not in the table");
    }
    // Extra labels reach every alert; the severity stays the alert's own.
    let labelled =
        chart::alerting_rules(&["--set", "prometheusRule.alertLabels.team=docs"]).unwrap();
    for (_, rule) in chart::alerts(&labelled) {
        assert_eq!(rule["labels"]["team"], "docs", "{rule}");
        assert!(rule["labels"]["severity"].is_string(), "{rule}");
    }
}

#[test]
fn the_operator_metrics_the_rules_and_the_dashboard_read_are_the_ones_it_exports() {
    let metrics = Metrics::default();
    let _lent = metrics.export_pools(|| {
        vec![PoolFigures {
            namespace: "docs".into(),
            name: "previews".into(),
            conditions: vec![("Ready".into(), "True".into(), "PoolReady".into())],
            pods: vec![("render", "ready", 1)],
            slots: vec![("ready", 1)],
        }]
    });
    metrics.write("Deployment", "apply");
    metrics.reconciled("applied", std::time::Duration::from_millis(1));
    let exposition = metrics.render().unwrap();
    let exported: BTreeSet<String> = exposition
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect();
    let rules = chart::alerting_rules(&[]).unwrap();
    let dashboard = chart::dashboard().unwrap();
    let exprs = chart::alerts(&rules)
        .into_iter()
        .map(|(_, rule)| rule["expr"].as_str().unwrap().to_string())
        .chain(chart::panel_queries(&dashboard).into_iter().map(|(_, _, expr)| expr));
    let mut read = BTreeSet::new();
    for expr in exprs {
        read.extend(
            chart::metric_names(&expr)
                .into_iter()
                .filter(|n| n.starts_with("renderpool_operator_")),
        );
    }
    assert!(read.len() >= 6, "{read:?}");
    for name in &read {
        assert!(exported.contains(name), "{name} is read but not exported:\n{exposition}");
    }
}

#[test]
fn the_dashboard_configmap_carries_the_dashboard_file_with_the_sidecars_label() {
    assert!(documents(&template(&[]).unwrap(), "PrometheusRule").is_empty(), "rules are opt-in");
    let rendered = template(&[]).unwrap();
    assert!(!rendered.contains("grafana_dashboard"), "the dashboard ConfigMap is opt-in");
    let rendered = template(&["--set", "grafanaDashboard.enabled=true"]).unwrap();
    let maps: Vec<Value> = documents(&rendered, "ConfigMap")
        .into_iter()
        .map(|doc| serde_saphyr::from_str(doc).unwrap())
        .filter(|map: &Value| map["metadata"]["labels"]["grafana_dashboard"] == "1")
        .collect();
    assert_eq!(maps.len(), 1, "{rendered}");
    assert_eq!(maps[0]["metadata"]["namespace"], "rp-system");
    let carried = maps[0]["data"]["renderpool.json"].as_str().unwrap();
    let file = std::fs::read_to_string(chart::dashboard_path()).unwrap();
    assert_eq!(carried, file.trim(), "the ConfigMap carries the file as it is");
    // Where another sidecar set-up looks.
    let elsewhere = template(&[
        "--set",
        "grafanaDashboard.enabled=true",
        "--set",
        "grafanaDashboard.namespace=monitoring",
        "--set",
        "grafanaDashboard.label=dashboards",
        "--set",
        "grafanaDashboard.annotations.grafana_folder=Render",
    ])
    .unwrap();
    let map: Value = documents(&elsewhere, "ConfigMap")
        .into_iter()
        .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap())
        .find(|map| map["metadata"]["labels"]["dashboards"] == "1")
        .unwrap_or_else(|| panic!("{elsewhere}"));
    assert_eq!(map["metadata"]["namespace"], "monitoring");
    assert_eq!(map["metadata"]["annotations"]["grafana_folder"], "Render");
}

#[test]
fn every_dashboard_panel_has_an_id_a_place_a_query_and_the_data_source_variable() {
    let dashboard = chart::dashboard().unwrap();
    assert_eq!(dashboard["uid"], "renderpool");
    let variables: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(variables, ["datasource", "namespace", "pool"]);
    let panels = dashboard["panels"].as_array().unwrap();
    let mut ids = BTreeSet::new();
    for panel in panels {
        let title = panel["title"].as_str().unwrap();
        assert!(ids.insert(panel["id"].as_u64().unwrap()), "{title}: id repeated");
        let place = &panel["gridPos"];
        let (x, w) = (place["x"].as_u64().unwrap(), place["w"].as_u64().unwrap());
        assert!(x + w <= 24 && place["h"].as_u64().unwrap() > 0, "{title}: {place}");
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{title}");
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{title} has no query");
        for target in targets {
            assert_eq!(target["datasource"]["uid"], "${datasource}", "{title}");
            let expr = target["expr"].as_str().unwrap();
            assert!(!chart::metric_names(expr).is_empty(), "{title}: {expr}");
            // A pool's series are filtered by the pickers; the operator's own are not pool series.
            let pool_series = chart::metric_names(expr)
                .iter()
                .any(|n| n.starts_with("renderpod_") || n.starts_with("renderpool_operator_pool_"));
            if pool_series {
                assert!(expr.contains(r#"renderpool=~"$pool""#), "{title}: {expr}");
            }
        }
    }
}

#[test]
fn the_scrapes_give_the_labels_the_alerts_group_by() {
    // The test's operator job is what the ServiceMonitor asks for.
    let rendered = template(&["--set", "metrics.serviceMonitor.enabled=true"]).unwrap();
    let monitor = document(&rendered, "ServiceMonitor").unwrap();
    let endpoint = &monitor["spec"]["endpoints"][0];
    let job = operator_job(std::path::Path::new("/targets.json"));
    assert_eq!(endpoint["path"], job["metrics_path"]);
    assert_eq!(endpoint["honorLabels"], job["honor_labels"]);
    assert_eq!(endpoint["honorLabels"], true, "the pool gauges keep their pool's namespace");
    // The PodMonitor names the pool as the shipped scrape job does.
    let rendered = template(&["--set", "renderPods.podMonitor.enabled=true"]).unwrap();
    let monitor = document(&rendered, "PodMonitor").unwrap();
    let relabel = &monitor["spec"]["podMetricsEndpoints"][0]["relabelings"][0];
    assert_eq!(relabel["targetLabel"], "renderpool");
    let shipped: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(scrape_config_path()).unwrap()).unwrap();
    let shipped_relabel = shipped["scrape_configs"][0]["relabel_configs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["target_label"] == "renderpool")
        .cloned()
        .unwrap();
    assert_eq!(relabel["sourceLabels"], shipped_relabel["source_labels"]);
}

#[test]
fn the_values_schema_refuses_bad_alerting_values() {
    for (value, complaint) in [
        ("prometheusRule.window=\"soon\"", "does not match pattern"),
        ("prometheusRule.for.RenderPoolDegraded=\"5 minutes\"", "does not match pattern"),
        ("prometheusRule.for.RenderPoolTypo=\"5m\"", "'RenderPoolTypo' not allowed"),
        ("prometheusRule.thresholds.busySlotRatio=1.5", "busySlotRatio': maximum"),
        ("grafanaDashboard.label=\"\"", "minLength"),
    ] {
        let err = template(&["--set-json", value]).unwrap_err();
        assert!(err.contains(complaint), "{value}: {err}");
    }
}
