//! dragon-scheduler's Helm chart (`k8s-shim/deploy/chart`) with the real
//! `helm` (v4, built from its Go module by tests/controlplane/build.sh):
//! linted, rendered with each way of giving the policy (and refused with a
//! message for a wrong one), and installed on the test control plane.
//!
//! The Deployment the chart installs cannot run here (no kubelet, no
//! image), so the install test runs the binary the way the chart's pod
//! would: with the configuration from the ConfigMap the chart installed
//! (only the container's paths and listen address replaced) and as the
//! ServiceAccount the chart created (a token of it), so the chart's RBAC
//! and leader-election Role are what it has. A gang of the chart's
//! scheduler name is then bound whole.
//!
//!     cargo test --release -p dragon-scheduler --test chart

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::Api;
use serde_json::{Value, json};

fn chart() -> PathBuf {
    repo().join("k8s-shim/deploy/chart")
}

/// `helm ARGS` against the test control plane, with helm's own state in a
/// directory of the run (never the user's); (success, stdout, stderr).
fn helm(args: &[&str]) -> (bool, String, String) {
    let cp = control_plane();
    let home = cp.run.join("helm-home");
    let out = Command::new(cp_bin().join("helm"))
        .args(args)
        .env("KUBECONFIG", &cp.kubeconfig)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .expect("run helm");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `helm template` with `sets` (`key=value`): the rendered objects by
/// "Kind/name", or helm's error.
fn render(sets: &[&str]) -> Result<BTreeMap<String, Value>, String> {
    let mut args = vec!["template", "dragon-scheduler"];
    let chart = chart();
    args.push(chart.to_str().unwrap());
    args.extend(["--namespace", "dragon-system"]);
    for s in sets {
        args.extend(["--set", s]);
    }
    let (ok, out, err) = helm(&args);
    if !ok {
        return Err(err);
    }
    let mut objects = BTreeMap::new();
    for doc in out.split("\n---") {
        let v: Value = serde_norway::from_str(doc).map_err(|e| format!("{e}: {doc}"))?;
        if v.is_null() {
            continue;
        }
        let key = format!(
            "{}/{}",
            v["kind"].as_str().unwrap_or_default(),
            v["metadata"]["name"].as_str().unwrap_or_default()
        );
        objects.insert(key, v);
    }
    Ok(objects)
}

/// The rendered `config.yaml`, parsed as dragon-scheduler parses it (a key
/// it does not know is an error), and as a value.
fn config_of(objects: &BTreeMap<String, Value>) -> Value {
    let text = objects["ConfigMap/dragon-scheduler-config"]["data"]["config.yaml"]
        .as_str()
        .expect("config.yaml in the ConfigMap");
    dragon_scheduler::config::Config::parse(text, "the chart's config.yaml")
        .unwrap_or_else(|e| panic!("dragon-scheduler refuses the chart's config: {e:#}\n{text}"));
    serde_norway::from_str(text).unwrap()
}

fn volumes(deployment: &Value) -> Vec<String> {
    deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_chart_lints_and_renders_each_policy_source_and_refuses_a_wrong_one() {
    let (ok, out, err) = helm(&["lint", "--strict", chart().to_str().unwrap()]);
    assert!(ok, "helm lint:\n{out}\n{err}");

    // Defaults: a bundled policy, leader election, a Service, no
    // ServiceMonitor; non-root, read-only, the shipped RBAC rules.
    let objects = render(&[]).unwrap();
    let kinds: Vec<&str> = objects
        .keys()
        .map(|k| k.split('/').next().unwrap())
        .collect();
    for kind in [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Service",
        "Deployment",
    ] {
        assert!(kinds.contains(&kind), "{kind} missing: {kinds:?}");
    }
    assert!(!kinds.contains(&"ServiceMonitor"), "{kinds:?}");
    let config = config_of(&objects);
    assert_eq!(config["policy"], "dragon");
    assert_eq!(config["schedulerName"], "dragon-scheduler");
    assert_eq!(
        config["leaderElection"],
        json!({"enabled": true, "namespace": "dragon-system", "leaseName": "dragon-scheduler", "leaseDurationSeconds": 15})
    );
    let d = &objects["Deployment/dragon-scheduler"];
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(d["spec"]["replicas"], 2);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let c = &pod["containers"][0]["securityContext"];
    assert_eq!(c["readOnlyRootFilesystem"], true, "{c}");
    assert_eq!(c["allowPrivilegeEscalation"], false, "{c}");
    assert_eq!(c["capabilities"]["drop"], json!(["ALL"]), "{c}");
    assert_eq!(volumes(d), ["config", "cache", "recordings"]);
    let rules: ClusterRole =
        serde_json::from_value(objects["ClusterRole/dragon-system-dragon-scheduler"].clone())
            .unwrap();
    assert_eq!(
        rules.rules,
        shipped_cluster_role().rules,
        "the chart's ClusterRole and k8s-shim/deploy/rbac.yaml differ"
    );
    let viewer = &objects["ClusterRole/dragon-system-dragon-scheduler-viewer"];
    assert_eq!(
        viewer["rules"][1]["nonResourceURLs"],
        json!(["/dragon/policy"]),
        "{viewer}"
    );

    // A policy from a ConfigMap: mounted as a directory, hot-reloaded.
    let objects = render(&["policy.bundled=", "policy.configMap=team-policy"]).unwrap();
    assert_eq!(
        config_of(&objects)["policy"],
        "/etc/dragon/policy/policy.wasm"
    );
    let d = &objects["Deployment/dragon-scheduler"];
    assert!(volumes(d).contains(&"policy".to_string()));
    assert!(
        d["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["configMap"]["name"] == "team-policy")
    );

    // From a registry, with its credentials; other settings merged in.
    let objects = render(&[
        "policy.bundled=",
        "policy.oci=oci://registry.example.com/team/dragon:stable",
        "policy.registrySecret=regcred",
        "config.clientQps=50",
        "recording.enabled=false",
    ])
    .unwrap();
    let config = config_of(&objects);
    assert_eq!(
        config["policy"],
        "oci://registry.example.com/team/dragon:stable"
    );
    assert_eq!(
        config["registry"]["configFile"],
        "/etc/dragon/registry/.dockerconfigjson"
    );
    assert_eq!(config["clientQps"], 50);
    assert_eq!(config["recording"], json!({"enabled": false}));
    assert_eq!(
        volumes(&objects["Deployment/dragon-scheduler"]),
        ["config", "registry", "cache"]
    );

    // A ServiceMonitor on request.
    let objects = render(&["metrics.serviceMonitor.enabled=true"]).unwrap();
    let monitor = &objects["ServiceMonitor/dragon-scheduler"];
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");

    // Wrong values: refused by helm, with what to change.
    let e = render(&["policy.configMap=team-policy"]).unwrap_err();
    assert!(e.contains("set exactly one of policy.bundled"), "{e}");
    let e = render(&["policy.bundled=", "policy.oci=registry.example.com/x:y"]).unwrap_err();
    assert!(e.contains("policy.oci must start with oci://"), "{e}");
    let e = render(&[
        "metrics.service.enabled=false",
        "metrics.serviceMonitor.enabled=true",
    ])
    .unwrap_err();
    assert!(e.contains("needs metrics.service.enabled"), "{e}");
    // A key dragon-scheduler does not know renders, and the scheduler
    // names it.
    let objects = render(&["config.bindConcurency=8"]).unwrap();
    let text = objects["ConfigMap/dragon-scheduler-config"]["data"]["config.yaml"]
        .as_str()
        .unwrap();
    let e = dragon_scheduler::config::Config::parse(text, "config.yaml").unwrap_err();
    assert!(format!("{e:#}").contains("bindConcurency"), "{e:#}");
}

/// What the chart's pod would run with: the installed ConfigMap's
/// `config.yaml`.
async fn installed_config(s: &Scenario) -> Value {
    let maps: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.name);
    let map = maps.get("dragon-scheduler-config").await.unwrap();
    let text = map
        .data
        .and_then(|d| d.get("config.yaml").cloned())
        .expect("config.yaml");
    serde_norway::from_str(&text).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chart_installed_with_helm_schedules_a_gang_as_its_service_account() {
    let _g = serial();
    let s = Scenario::new("chart").await;
    let chart = chart();
    let name = s.scheduler_name();
    let set_name = format!("schedulerName={name}");
    let (ok, out, err) = helm(&[
        "install",
        "dragon-scheduler",
        chart.to_str().unwrap(),
        "--namespace",
        &s.name,
        "--set",
        &set_name,
    ]);
    assert!(ok, "helm install:\n{out}\n{err}");
    assert!(out.contains(&format!("schedulerName: {name}")), "{out}");

    let deployments: Api<Deployment> = Api::namespaced(s.client.clone(), &s.name);
    let d = deployments.get("dragon-scheduler").await.unwrap();
    assert_eq!(d.spec.replicas, Some(2));
    // Its pods cannot run here: scaled to none with `helm upgrade`, the
    // binary below stands in for them.
    let (ok, out, err) = helm(&[
        "upgrade",
        "dragon-scheduler",
        chart.to_str().unwrap(),
        "--namespace",
        &s.name,
        "--reuse-values",
        "--set",
        "replicas=0",
    ]);
    assert!(ok, "helm upgrade:\n{out}\n{err}");
    until(60, "the Deployment's pods gone", || async {
        s.pods().await.is_empty()
    })
    .await;

    // The binary, as the chart's pod, with the chart's identity.
    let kubeconfig: PathBuf = account_kubeconfig(&s.client, &s.name, "dragon-scheduler").await;
    let config = installed_config(&s).await;
    assert_eq!(config["schedulerName"], name.as_str());
    let sched = Scheduler::start_from(&s, config, Path::new(&kubeconfig));
    until(30, "the chart's scheduler leads", || async {
        sched.metric("dragon_is_leader") == 1.0
    })
    .await;

    for n in ["a", "b"] {
        s.node(n, 2).await;
    }
    s.podgroup("gang", 3, json!({})).await;
    for i in 0..3 {
        s.member(&format!("gang-{i}"), "gang", 1, None, None).await;
    }
    until(60, "the gang bound whole", || async {
        bound(&s.placement("gang-").await) == 3
    })
    .await;
    s.assert_invariants(30, &[&sched], None).await;

    // `kubectl dragon` answers through the chart's RBAC: the scheduler
    // reviews the asker's token and access as its service account.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-dragon"))
        .args(["why", &format!("{}/gang-0", s.name), "--endpoint"])
        .arg(format!("http://{}", sched.metrics))
        .env("KUBECONFIG", &control_plane().kubeconfig)
        .output()
        .unwrap();
    let (text, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && text.contains(": bound on node"),
        "{text}{err}"
    );

    let (ok, out, err) = helm(&["uninstall", "dragon-scheduler", "--namespace", &s.name]);
    assert!(ok, "helm uninstall:\n{out}\n{err}");
    let roles: Api<ClusterRole> = Api::all(s.client.clone());
    let role = format!("{}-dragon-scheduler", s.name);
    assert!(
        roles.get_opt(&role).await.unwrap().is_none(),
        "the chart's ClusterRole outlived the release"
    );
    drop(sched);
    s.cleanup().await;
}
