//! `kubectl dragon` against dragon-scheduler on a real control plane, as a
//! user whose only rights are a Role in one namespace: `why` names the
//! reason a gang waits and an estimated start (whose error against the
//! real start is printed), `top` shows only what the user may list, and
//! each kind of bad input is one line and a non-zero exit.
//!
//!     cargo test --release -p dragon-scheduler --test kubectl -- --nocapture
//!
//! The tests ask the scheduler's endpoint directly (`--endpoint`): the API
//! server refuses to proxy to a loopback address (`IsProxyableIP`), and
//! servers here listen on 127.0.0.1 only. The proxy path is exercised as far
//! as the API server's answer for a Service that is not there.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use common::*;
use dragon_scheduler::insight::{Top, Why};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

/// Run `kubectl-dragon` as the user of `kubeconfig`: (succeeded, stdout,
/// stderr).
fn kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-dragon"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .expect("run kubectl-dragon");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A failure is one line, saying `what`.
fn fails_with(run: (bool, String, String), what: &str) {
    let (ok, _, err) = run;
    assert!(!ok, "expected a failure saying {what:?}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains(what), "expected {what:?} in: {err}");
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A ServiceAccount `name` in `s`'s namespace, allowed `verbs` on its pods
/// (none: no Role at all), and a kubeconfig with its token.
async fn user(s: &Scenario, name: &str, verbs: &[&str]) -> std::path::PathBuf {
    let accounts: Api<ServiceAccount> = Api::namespaced(s.client.clone(), &s.name);
    s.create(&accounts, json!({"metadata": {"name": name}}))
        .await;
    if !verbs.is_empty() {
        let roles: Api<Role> = Api::namespaced(s.client.clone(), &s.name);
        s.create(
            &roles,
            json!({"metadata": {"name": name},
                   "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": verbs}]}),
        )
        .await;
        let bindings: Api<RoleBinding> = Api::namespaced(s.client.clone(), &s.name);
        s.create(
            &bindings,
            json!({"metadata": {"name": name},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                   "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": s.name}]}),
        )
        .await;
    }
    account_kubeconfig(&s.client, &s.name, name).await
}

/// A gang of four one-GPU workers `name-0..3` that run `seconds`.
async fn gang(s: &Scenario, name: &str, seconds: u32) {
    s.podgroup(name, 4, json!({})).await;
    for i in 0..4 {
        s.pod(
            &format!("{name}-{i}"),
            Some((name, "worker", i)),
            1,
            Some(seconds),
        )
        .await;
    }
}

/// Wait until every pod of gang `name` is bound; the moment seen, ms.
async fn started(s: &Scenario, name: &str, secs: u64) -> u64 {
    until(secs, &format!("gang {name} bound"), || async {
        bound(&s.placement(&format!("{name}-")).await) == 4
    })
    .await;
    now_ms()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_names_a_waiting_gangs_reason_and_an_estimated_start_close_to_the_real_one() {
    let _g = serial();
    let s = Scenario::new("why").await;
    s.node("a", 4).await;
    // Waiting jobs are taken to run 20 s, as these do.
    let sched = Scheduler::start(&s, "dragon", "estimates: {assumeDurationSeconds: 20}\n");
    let endpoint = format!("http://{}", sched.metrics);
    let viewer = user(&s, "viewer", &["get", "list"]).await;

    // alpha runs 30 s and reports its progress; beta and gamma wait.
    gang(&s, "alpha", 30).await;
    let alpha_start = started(&s, "alpha", 60).await;
    gang(&s, "beta", 20).await;
    gang(&s, "gamma", 20).await;
    // Let alpha run a while, as far as the rounds beta and gamma get.
    until(30, "beta tried and waiting", || async {
        let (ok, out, _) = kubectl(
            &viewer,
            &["why", "why/beta-0", "--endpoint", &endpoint, "-o", "json"],
        );
        ok && serde_json::from_str::<Why>(&out).is_ok_and(|w| !w.story.is_empty())
    })
    .await;
    // alpha says how far it is every moment, as a training loop would;
    // without that it would be taken to need an hour more. Once it has run
    // a few seconds its pace is known well enough: beta's estimate is then
    // within the minute.
    let groups = podgroups(&s.client, &s.name);
    until(60, "alpha's progress used", || async {
        let ran = now_ms() - alpha_start;
        let done = format!("{:.4}", ran as f64 / 30_000.0);
        let progress = json!({"metadata": {"annotations": {"dragon.dev/progress": done}}});
        groups
            .patch("alpha", &PatchParams::default(), &Patch::Merge(progress))
            .await
            .unwrap();
        let (ok, out, _) = kubectl(
            &viewer,
            &["why", "why/beta-0", "--endpoint", &endpoint, "-o", "json"],
        );
        ran > 6_000
            && ok
            && serde_json::from_str::<Why>(&out).is_ok_and(|w| {
                w.estimate
                    .and_then(|e| e.start_ms)
                    .is_some_and(|t| t < now_ms() + 60_000)
            })
    })
    .await;

    let mut estimates = Vec::new();
    for name in ["beta", "gamma"] {
        let pod = format!("why/{name}-0");
        let (ok, out, err) = kubectl(
            &viewer,
            &["why", &pod, "--endpoint", &endpoint, "-o", "json"],
        );
        assert!(ok, "{err}");
        let why: Why = serde_json::from_str(&out).unwrap();
        assert_eq!(why.state, "pending");
        assert_eq!(why.gang.as_deref(), Some(format!("why/{name}").as_str()));
        let reason = why.now.clone().unwrap_or_default();
        assert!(
            reason.contains("GPU") || reason.contains("gpu"),
            "the reason names what is short: {reason}"
        );
        assert_eq!(why.closest[0].node, "why-a", "{why:?}");
        assert!(
            why.closest[0].short.iter().any(|s| s.contains("GPUs")),
            "{why:?}"
        );
        let estimate = why.estimate.clone().expect("an estimate");
        let start = estimate
            .start_ms
            .unwrap_or_else(|| panic!("a start: {estimate:?}"));
        estimates.push((name, start));
        // The same as text.
        let (ok, text, err) = kubectl(&viewer, &["why", &pod, "--endpoint", &endpoint]);
        assert!(ok, "{err}");
        assert!(
            text.contains("why now:") && text.contains("estimated start: in"),
            "{text}"
        );
        eprintln!("{text}");
    }
    for (name, estimated) in estimates {
        let real = started(&s, name, 120).await;
        let error_s = (real as f64 - estimated as f64) / 1e3;
        eprintln!("estimate error: gang {name} started {error_s:+.1} s after its estimate");
        assert!(error_s.abs() < 30.0, "gang {name}: {error_s:+.1} s off");
    }
    // Once it runs, why says where.
    let (ok, out, err) = kubectl(
        &viewer,
        &["why", "why/gamma-0", "--endpoint", &endpoint, "-o", "json"],
    );
    assert!(ok, "{err}");
    let why: Why = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (why.state.as_str(), why.node.as_deref()),
        ("bound", Some("why-a"))
    );
    drop(sched);
    s.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_dragon_answers_only_what_the_user_may_read_and_fails_in_one_line() {
    let _g = serial();
    let s = Scenario::new("asks").await;
    s.node("a", 4).await;
    let sched = Scheduler::start(&s, "dragon", "");
    let endpoint = format!("http://{}", sched.metrics);
    let viewer = user(&s, "viewer", &["get", "list"]).await;
    let nobody = user(&s, "nobody", &[]).await;
    gang(&s, "one", 600).await;
    started(&s, "one", 60).await;
    s.pod_for("theirs", "default-scheduler", None, 0).await;
    s.gated_pod("admitted-later", None, 1, &["kueue.x-k8s.io/admission"])
        .await;
    let cp = control_plane();

    // top in the user's namespace: its gang, no nodes (it may not list them).
    let (ok, out, err) = kubectl(
        &viewer,
        &["top", "-n", "asks", "--endpoint", &endpoint, "-o", "json"],
    );
    assert!(ok, "{err}");
    let top: Top = serde_json::from_str(&out).unwrap();
    assert_eq!(top.gangs.len(), 1, "{top:?}");
    assert_eq!(
        (top.gangs[0].state.as_str(), top.gangs[0].gpus),
        ("running", 4)
    );
    assert!(top.nodes.is_empty(), "{top:?}");
    // An administrator sees the nodes.
    let (ok, out, err) = kubectl(
        &cp.kubeconfig,
        &["top", "--endpoint", &endpoint, "-o", "json"],
    );
    assert!(ok, "{err}");
    let top: Top = serde_json::from_str(&out).unwrap();
    assert!(
        top.nodes
            .iter()
            .any(|n| n.node == "asks-a" && n.used_gpus == 4),
        "{top:?}"
    );
    let (ok, out, err) = kubectl(&cp.kubeconfig, &["policy", "--endpoint", &endpoint]);
    assert!(ok && out.contains("serving dragon"), "{out}{err}");

    // Every namespace: refused by the scheduler, naming the right missing.
    fails_with(
        kubectl(&viewer, &["top", "--endpoint", &endpoint]),
        "may not list pods in all namespaces",
    );
    fails_with(
        kubectl(&viewer, &["policy", "--endpoint", &endpoint]),
        "may not get /dragon/policy",
    );
    fails_with(
        kubectl(&viewer, &["why", "asks/nothing", "--endpoint", &endpoint]),
        "pod asks/nothing not found",
    );
    fails_with(
        kubectl(&nobody, &["why", "asks/one-0", "--endpoint", &endpoint]),
        "you may not read pod asks/one-0",
    );
    fails_with(
        kubectl(&viewer, &["why", "asks/theirs", "--endpoint", &endpoint]),
        "is scheduled by \"default-scheduler\", not by dragon-scheduler",
    );
    fails_with(
        kubectl(
            &viewer,
            &["why", "asks/admitted-later", "--endpoint", &endpoint],
        ),
        "but Kueue is not installed",
    );
    let down = format!("http://127.0.0.1:{}", free_port());
    fails_with(
        kubectl(&viewer, &["why", "asks/one-0", "--endpoint", &down]),
        "does not answer",
    );
    // Through the API server's proxy, to a Service that is not there.
    fails_with(
        kubectl(
            &viewer,
            &[
                "why",
                "asks/one-0",
                "--scheduler-namespace",
                "asks",
                "--service",
                "none",
            ],
        ),
        "through the API server's proxy does not answer",
    );
    // The endpoint itself wants a token it can review.
    let (code, body) = http_get(&sched.metrics, "/dragon/v1/why/asks/one-0").expect("an answer");
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("no token"), "{body}");
    drop(sched);
    s.cleanup().await;
}
