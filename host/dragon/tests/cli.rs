//! The `dragon` binary as a user runs it.

use std::process::Command;

fn dragon(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dragon"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .env(
            "DRAGON_CACHE_DIR",
            std::env::temp_dir().join("dragon-cli-test-cache"),
        )
        .output()
        .expect("run dragon");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn scratch(name: &str, bytes: &[u8]) -> String {
    let dir = std::env::temp_dir().join(format!("dragon-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.display().to_string()
}

#[test]
fn policy_check_accepts_every_bundled_policy_and_prints_the_interface_version() {
    for &name in dragon_bundled::NAMES {
        let (ok, out, err) = dragon(&["policy", "check", name]);
        assert!(ok, "{err}");
        assert!(
            out.contains(&format!("policy:            {name} 0.1.0")),
            "{out}"
        );
        assert!(
            out.contains("interface:         dragon:scheduler@0.4.0"),
            "{out}"
        );
        assert!(out.contains("compile:"), "{out}");
    }
}

#[test]
fn policy_check_rejects_garbage_core_modules_and_bad_settings_with_distinct_messages() {
    let garbage = scratch("garbage.wasm", b"not wasm");
    let core = scratch("core.wasm", b"\0asm\x01\0\0\0");
    let cases = [
        (
            vec!["policy", "check", garbage.as_str()],
            "is not a WebAssembly binary",
        ),
        (
            vec!["policy", "check", core.as_str()],
            "is a core WebAssembly module, not a component",
        ),
        (
            vec![
                "policy",
                "check",
                "dragon",
                "--settings",
                r#"{"idle_threshold_s": -5}"#,
            ],
            "refused its settings",
        ),
        (
            vec!["policy", "check", "/no/such/policy.wasm"],
            "cannot read policy /no/such/policy.wasm",
        ),
    ];
    for (args, expected) in cases {
        let (ok, _, err) = dragon(&args);
        assert!(!ok, "{args:?} should fail");
        assert!(
            err.starts_with("error: ") && err.contains(expected),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn policy_run_places_a_gang_all_or_nothing_and_on_one_node_when_one_fits() {
    let (ok, out, err) = dragon(&[
        "policy",
        "run",
        "dragon",
        "--input",
        "examples/cases/one-node.yaml",
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains("admitted     job/inception3: 5 pods, 4 workers, on 1 node(s)"),
        "{out}"
    );
    let (ok, out, err) = dragon(&[
        "policy",
        "run",
        "dragon",
        "--input",
        "examples/cases/two-gangs.yaml",
        "--json",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let binds: Vec<&str> = v["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"] == "bound")
        .map(|d| d["pod"].as_str().unwrap())
        .collect();
    assert_eq!(binds.len(), 7);
    assert!(
        binds.iter().all(|p| p.starts_with("resnet50-")),
        "{binds:?}"
    );
}

#[test]
fn policy_run_names_the_place_of_a_bad_input() {
    let case = scratch(
        "bad.yaml",
        b"nodes:\n  - {name_prefix: gpu, count: 1, cpu: 8, memory_gib: 32, gpus: 4}\njobs:\n  - name: j\n    workers: {count: 2, min: 3, gpus: 1}\n",
    );
    let (ok, _, err) = dragon(&["policy", "run", "dragon", "--input", &case]);
    assert!(!ok);
    assert!(err.contains("jobs[0] (j).workers.min"), "{err}");
    let case = scratch("typo.yaml", b"nodes: []\njobz: []\n");
    let (ok, _, err) = dragon(&["policy", "run", "dragon", "--input", &case]);
    assert!(!ok);
    assert!(
        err.contains("typo.yaml") && err.contains("unknown field `jobz`"),
        "{err}"
    );
}

#[test]
fn policy_export_writes_the_component_or_a_configmap_that_carries_it() {
    let wasm = scratch("exported.wasm", b"");
    let (ok, _, err) = dragon(&["policy", "export", "dragon", "--out", &wasm]);
    assert!(ok, "{err}");
    let bytes = std::fs::read(&wasm).unwrap();
    assert_eq!(&bytes[..4], b"\0asm");
    let (ok, out, err) = dragon(&["policy", "check", &wasm]);
    assert!(ok && out.contains("policy:            dragon"), "{err}");
    let cm = scratch("cm.yaml", b"");
    let (ok, _, err) = dragon(&[
        "policy",
        "export",
        "baseline",
        "--configmap",
        "kube-system/dragon-policy",
        "--out",
        &cm,
    ]);
    assert!(ok, "{err}");
    let yaml = std::fs::read_to_string(&cm).unwrap();
    assert!(
        yaml.contains("kind: ConfigMap")
            && yaml.contains("namespace: kube-system")
            && yaml.contains("policy.wasm: AGFzbQ"),
        "{yaml:.200}"
    );
}

#[test]
fn policy_run_exits_3_when_hook_calls_failed_unless_allowed_and_logs_carry_no_colour_codes() {
    let hostile = scratch("hostile.wasm", dragon_test_policies::HOSTILE);
    let run = |extra: &[&str]| {
        let mut args = vec![
            "policy",
            "run",
            hostile.as_str(),
            "--settings",
            r#"{"fault": "trap", "hook": "filter"}"#,
            "--input",
            "examples/cases/two-gangs.yaml",
        ];
        args.extend_from_slice(extra);
        Command::new(env!("CARGO_BIN_EXE_dragon"))
            .args(&args)
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .env("DRAGON_LOG", "info")
            .env(
                "DRAGON_CACHE_DIR",
                std::env::temp_dir().join("dragon-cli-test-cache"),
            )
            .output()
            .expect("run dragon")
    };
    let out = run(&[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("error"),
        "the decisions are printed: {stdout}"
    );
    assert!(stderr.contains("hook call(s) failed"), "{stderr}");
    // stderr is a pipe here, not a terminal.
    assert!(!stderr.contains('\x1b'), "colour codes in {stderr:?}");

    let out = run(&["--allow-failures"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A round with no failure exits 0.
    let (ok, _, err) = dragon(&[
        "policy",
        "run",
        "dragon",
        "--input",
        "examples/cases/two-gangs.yaml",
    ]);
    assert!(ok, "{err}");
}

#[test]
fn a_recorded_simulation_replays_identically_and_another_policy_shows_its_differences() {
    let rec = scratch("deadlock.rec", b"");
    let (ok, _, err) = dragon(&[
        "simulate", "--policy", "dragon", "--trace", "deadlock", "--record", &rec,
    ]);
    assert!(ok, "{err}");
    assert!(err.contains("recorded to"), "{err}");

    let (ok, out, err) = dragon(&["replay", &rec]);
    assert!(ok, "{err}");
    assert!(out.contains("(the recorded policy)"), "{out}");
    assert!(
        out.contains("decisions identical to the recording"),
        "{out}"
    );

    let (ok, out, err) = dragon(&["replay", &rec, "--policy", "baseline", "--show", "1"]);
    assert!(
        ok,
        "a different policy differs, and that is the answer: {err}"
    );
    assert!(out.contains("steps decided differently"), "{out}");
    assert!(
        out.contains("  recorded: [") && out.contains("  replayed: ["),
        "{out}"
    );

    // A recording cut mid-record: the complete records replay, with a warning.
    let bytes = std::fs::read(&rec).unwrap();
    let torn = scratch("torn.rec", &bytes[..bytes.len() - 5]);
    let (ok, out, err) = dragon(&["replay", &torn]);
    assert!(ok, "{err}");
    assert!(
        err.contains("the last record was cut short and is skipped"),
        "{err}"
    );
    assert!(out.contains("decisions identical"), "{out}");

    let foreign = scratch("foreign.rec", b"{\"jobs\": []}");
    let (ok, _, err) = dragon(&["replay", &foreign]);
    assert!(!ok);
    assert!(err.contains("foreign.rec: not a Dragon recording"), "{err}");

    // Why a pod waited: job a's gang, step by step, until it was placed.
    let (ok, out, err) = dragon(&["replay", &rec, "--explain", "a-worker-0"]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    // Unschedulable from its arrival until the jobs ahead of it finished
    // (the simulator tries it again only once room could fit it, so its
    // reason stands until then); then bound and admitted.
    assert!(
        lines[0].starts_with("t = 10.0 s ")
            && lines[0].contains("unschedulable: gang does not fit"),
        "{out}"
    );
    let n = lines.len();
    assert!(n >= 3, "{out}");
    assert!(lines[n - 2].contains("  bound: gpu-"), "{out}");
    assert!(lines[n - 1].ends_with("  admitted"), "{out}");
    let (ok, _, err) = dragon(&["replay", &rec, "--explain", "nobody"]);
    assert!(!ok);
    assert!(err.contains("no pod `nobody` in the recording"), "{err}");
}

#[test]
fn the_gate_passes_a_sound_candidate_and_names_the_rule_another_breaks() {
    let rec = scratch("gate.rec", b"");
    let (ok, _, err) = dragon(&[
        "simulate", "--policy", "dragon", "--trace", "deadlock", "--record", &rec,
    ]);
    assert!(ok, "{err}");
    let (ok, out, err) = dragon(&["policy", "gate", "baseline", "--recording", &rec]);
    assert!(ok, "{err}");
    assert!(out.contains("`baseline` passes the gate on "), "{out}");

    let hostile = scratch("hostile.wasm", dragon_test_policies::HOSTILE);
    let (ok, _, err) = dragon(&[
        "policy",
        "gate",
        &hostile,
        "--settings",
        r#"{"fault": "bad-output", "hook": "pre-filter"}"#,
        "--recording",
        &rec,
    ]);
    assert!(!ok);
    assert!(
        err.contains(
            "`hostile` is refused by the gate: the policy failed on the step recorded at t = "
        ),
        "{err}"
    );
}

#[test]
fn golden_cases_next_to_a_candidate_must_decide_as_recorded() {
    let dir = std::env::temp_dir().join(format!("dragon-cli-golden-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let wasm = dir.join("candidate.wasm").display().to_string();
    let (ok, _, err) = dragon(&["policy", "export", "dragon", "--out", &wasm]);
    assert!(ok, "{err}");
    let (ok, _, err) = dragon(&["policy", "gate", &wasm]);
    assert!(!ok);
    assert!(err.contains("nothing to run `dragon` on"), "{err}");

    let own = dir
        .join("candidate.golden.deadlock.rec")
        .display()
        .to_string();
    let (ok, _, err) = dragon(&[
        "simulate", "--policy", &wasm, "--trace", "deadlock", "--record", &own,
    ]);
    assert!(ok, "{err}");
    let (ok, out, err) = dragon(&["policy", "gate", &wasm]);
    assert!(ok, "{err}");
    assert!(
        out.contains("`dragon` decides its 1 golden case(s) as recorded (")
            && out.contains("candidate.golden.deadlock.rec"),
        "{out}"
    );

    // A ConfigMap carries the policy and its case under the names the
    // gate looks for beside `policy.wasm`.
    let cm = dir.join("cm.yaml").display().to_string();
    let (ok, _, err) = dragon(&[
        "policy",
        "export",
        &wasm,
        "--configmap",
        "kube-system/dragon-policy",
        "--golden",
        &own,
        "--out",
        &cm,
    ]);
    assert!(ok, "{err}");
    let yaml = std::fs::read_to_string(&cm).unwrap();
    assert!(
        yaml.contains("  policy.wasm: AGFzbQ") && yaml.contains("  policy.golden.deadlock.rec: "),
        "{yaml:.300}"
    );

    // A case whose recorded decisions are another policy's.
    let other = dir.join("candidate.golden.paper.rec").display().to_string();
    let (ok, _, err) = dragon(&[
        "simulate", "--policy", "baseline", "--trace", "deadlock", "--record", &other,
    ]);
    assert!(ok, "{err}");
    let (ok, _, err) = dragon(&["policy", "gate", &wasm]);
    assert!(!ok);
    assert!(
        err.contains("`dragon` is refused by the gate: golden case ")
            && err.contains("candidate.golden.paper.rec: ")
            && err.contains("decided otherwise than recorded; the first, at t = "),
        "{err}"
    );

    // A case that is not a recording is named, with the cause.
    std::fs::write(&other, b"not a recording").unwrap();
    let (ok, _, err) = dragon(&["policy", "gate", &wasm]);
    assert!(!ok);
    assert!(
        err.contains("candidate.golden.paper.rec: not a Dragon recording"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_simulation_resumes_from_where_a_recording_ends() {
    let rec = scratch("resume.rec", b"");
    let (ok, _, err) = dragon(&[
        "simulate",
        "--policy",
        "dragon",
        "--trace",
        "paper",
        "--horizon-s",
        "3000",
        "--record",
        &rec,
    ]);
    assert!(ok, "{err}");
    let (ok, out, err) = dragon(&[
        "simulate",
        "--policy",
        "baseline",
        "--from-recording",
        &rec,
        "--assume-remaining-s",
        "600",
    ]);
    assert!(ok, "{err}");
    assert!(
        err.contains("at t = 3000.0 s: 4 nodes, 20 jobs (") && err.contains(" running)"),
        "{err}"
    );
    assert!(
        out.contains("policy baseline on ")
            && out.contains("(running jobs assumed to need 600 s more, waiting jobs 3600 s)")
            && out.contains("jobs completed       20 / 20"),
        "{out}"
    );

    let (ok, _, err) = dragon(&["simulate", "--assume-remaining-s", "600"]);
    assert!(!ok);
    assert!(err.contains("--from-recording"), "{err}");
    let bad = scratch("resume-bad.rec", b"not a recording");
    let (ok, _, err) = dragon(&["simulate", "--from-recording", &bad]);
    assert!(!ok);
    assert!(
        err.contains("cannot simulate from")
            && err.contains("resume-bad.rec: not a Dragon recording"),
        "{err}"
    );
}

#[test]
fn compare_puts_the_zoo_side_by_side_in_one_table_and_one_report() {
    let zoo = [
        "baseline",
        "dragon",
        "tiresias",
        "pollux",
        "backfill",
        "dragon-plus",
        "fair-share",
    ];
    let dir = std::env::temp_dir().join(format!("dragon-cli-test-zoo-{}", std::process::id()));
    let out_dir = dir.display().to_string();
    let mut args = vec!["compare", "--trace", "paper", "--out", &out_dir];
    args.extend(zoo);
    let (ok, out, err) = dragon(&args);
    assert!(ok, "{err}");
    // One row per policy in each of the three blocks (values, ratios,
    // counts), the table within a 100-column terminal.
    let table: Vec<&str> = out
        .lines()
        .take_while(|l| !l.contains(": all jobs finished"))
        .collect();
    for line in &table {
        assert!(
            line.chars().count() <= 100,
            "wider than 100 columns: {line}\n{out}"
        );
    }
    assert!(
        table.iter().any(|l| l.starts_with("against baseline")),
        "{out}"
    );
    for name in zoo {
        let rows = table
            .iter()
            .filter(|l| l.split_whitespace().next() == Some(name))
            .count();
        assert_eq!(rows, 3, "{name} rows: {out}");
        assert!(out.contains(&format!("{name}: all jobs finished")), "{out}");
        assert!(dir.join(name).join("jobs.csv").exists(), "{name}");
    }
    let report = std::fs::read_to_string(dir.join("report.html")).unwrap();
    // The time series get one titled panel per policy.
    for plot in ["gpu_util.svg", "queue.svg"] {
        let svg = std::fs::read_to_string(dir.join(plot)).unwrap();
        for name in zoo {
            assert!(
                svg.contains(&format!(">\n{name}\n</text>")),
                "no {name} panel in {plot}"
            );
        }
    }
    for name in zoo {
        assert!(report.contains(name), "{name} not in report.html");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn importing_from_a_directory_that_is_not_the_artifacts_names_it() {
    let out = std::env::temp_dir().join(format!("dragon-cli-import-{}", std::process::id()));
    let out = out.display().to_string();
    let (ok, _, err) = dragon(&[
        "trace",
        "import",
        "sia",
        "/no/such/sia-simulator",
        "--out",
        &out,
    ]);
    assert!(!ok);
    assert!(
        err.contains("/no/such/sia-simulator: not Sia's simulator directory"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(out);
}
