//! A policy author's path with the `dragon` binary: `policy new`, `build`
//! and `test` on a project outside the repository, as a user runs them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Where the projects live: under the workspace's target directory, at
/// stable paths, so the nested builds reuse their compiled dependencies.
fn projects() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/policy-projects")
}

/// A clean directory for one test's project.
fn home(test: &str) -> PathBuf {
    let dir = projects().join("home").join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn dragon(dir: &Path, args: &[&str]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dragon"));
    cmd.args(args)
        .current_dir(dir)
        .env("DRAGON_CACHE_DIR", projects().join("cache"))
        .env("CARGO_TARGET_DIR", projects().join("target"))
        // `policy build` installs the guest toolchains into the cache.
        .env_remove("DRAGON_COMPONENTIZE_PY")
        .env_remove("DRAGON_COMPONENTIZE_JS");
    // The outer build's flags are for this workspace, not the project.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        cmd.env_remove(var);
    }
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("run dragon");
    Run {
        code: status.code(),
        stdout: String::from_utf8_lossy(&stdout).into(),
        stderr: String::from_utf8_lossy(&stderr).into(),
    }
}

/// Whether `policy build` finished installing the toolchain `name` into
/// the cache.
fn installed(name: &str) -> bool {
    projects()
        .join("cache/toolchains")
        .join(name)
        .join(".dragon-installed")
        .is_file()
}

/// Replace `marker` in the project's `file` (once) with `with`.
fn patch(project: &Path, file: &str, marker: &str, with: &str) {
    let path = project.join(file);
    let source = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        source.matches(marker).count(),
        1,
        "the template changed: update this test"
    );
    std::fs::write(&path, source.replace(marker, with)).unwrap();
}

/// Build the project and run its cases, which fail in `score`: the line
/// that explains the failure, the same on a second run.
fn failing_score_explained(project: &Path) -> String {
    ok(&dragon(project, &["policy", "build"]));
    let first = dragon(project, &["policy", "test"]);
    assert_eq!(first.code, Some(1), "{}\n{}", first.stdout, first.stderr);
    let said = first
        .stdout
        .lines()
        .find(|l| l.contains("failed in `score`"))
        .unwrap_or_else(|| panic!("no failed score in: {}", first.stdout))
        .to_string();
    let again = dragon(project, &["policy", "test"]);
    assert!(again.stdout.contains(&said), "{}\nvs\n{said}", again.stdout);
    said
}

#[track_caller]
fn ok(run: &Run) {
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
}

/// A guest's run through the simulator replays to the same decisions (its
/// clock is the call's, its random numbers seeded) and passes the gate on
/// its own recording, as a Rust policy does.
fn replays_exactly_and_passes_the_gate(project: &Path) {
    let sim = dragon(
        project,
        &[
            "simulate",
            "--policy",
            "policy.wasm",
            "--trace",
            "paper",
            "--record",
            "run.rec",
        ],
    );
    ok(&sim);
    let replay = dragon(project, &["replay", "run.rec", "--policy", "policy.wasm"]);
    ok(&replay);
    assert!(
        replay
            .stdout
            .contains("decisions identical to the recording"),
        "{}",
        replay.stdout
    );
    let gate = dragon(
        project,
        &["policy", "gate", "policy.wasm", "--recording", "run.rec"],
    );
    ok(&gate);
}

#[test]
fn policy_new_build_and_test_round_trip() {
    let home = home("round-trip");
    ok(&dragon(&home, &["policy", "new", "most-free"]));
    let project = home.join("most-free");

    let build = dragon(&project, &["policy", "build"]);
    ok(&build);
    assert!(
        build.stdout.contains("policy:            most-free 0.1.0"),
        "{}",
        build.stdout
    );
    assert!(
        build.stdout.contains("hooks:             score"),
        "{}",
        build.stdout
    );
    let test = dragon(&project, &["policy", "test"]);
    ok(&test);
    assert!(
        test.stdout.contains("case most-free: ok"),
        "{}",
        test.stdout
    );
    assert!(test.stdout.contains("case pack: ok"), "{}", test.stdout);

    // The project's own unit tests, natively.
    let unit = Command::new("cargo")
        .args(["test", "--release", "--quiet"])
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", projects().join("target"))
        .output()
        .unwrap();
    assert!(
        unit.status.success(),
        "{}",
        String::from_utf8_lossy(&unit.stderr)
    );

    // A change of behaviour shows as a diff, and fails until blessed.
    let lib = project.join("src/lib.rs");
    let source = std::fs::read_to_string(&lib).unwrap();
    let flipped = "if self.settings.pack { free } else { u32::MAX - free }";
    let edited = source.replace(
        "if self.settings.pack { u32::MAX - free } else { free }",
        flipped,
    );
    assert_ne!(
        edited, source,
        "the scaffold's score line changed; update this test"
    );
    std::fs::write(&lib, edited).unwrap();
    ok(&dragon(&project, &["policy", "build"]));
    let test = dragon(&project, &["policy", "test"]);
    assert_eq!(test.code, Some(1), "{}", test.stdout);
    assert!(
        test.stdout.contains("-  node: gpu-1\n+  node: gpu-2"),
        "{}",
        test.stdout
    );
    assert!(
        test.stderr.contains("2 of 2 case(s) differ"),
        "{}",
        test.stderr
    );
    ok(&dragon(&project, &["policy", "test", "--bless"]));
    ok(&dragon(&project, &["policy", "test"]));

    // A build that fails names the project and keeps the last good component.
    let before = std::fs::read(project.join("policy.wasm")).unwrap();
    std::fs::write(&lib, "fn broken( {").unwrap();
    let build = dragon(&project, &["policy", "build"]);
    assert_eq!(build.code, Some(1));
    assert!(
        build.stderr.contains("cargo build failed in ."),
        "{}",
        build.stderr
    );
    assert_eq!(std::fs::read(project.join("policy.wasm")).unwrap(), before);
}

#[test]
fn bad_names_directories_and_cases_get_one_line_errors() {
    let home = home("bad-input");
    let cases = [
        (
            vec!["policy", "new", "2fast"],
            "\"2fast\" cannot name a policy: must start with a letter",
        ),
        (
            vec!["policy", "new", "my policy"],
            "may hold only ASCII letters",
        ),
        (vec!["policy", "new", "fn"], "is a Rust keyword"),
        (
            vec!["policy", "new", "p", "--sdk", "."],
            "no Cargo.toml there",
        ),
        (
            vec!["policy", "build"],
            "holds no policy project (no Cargo.toml, nor app.py or app.js beside wit/)",
        ),
        (
            vec!["policy", "test"],
            "no component at ./policy.wasm: run `dragon policy build` first",
        ),
    ];
    for (args, message) in cases {
        let run = dragon(&home, &args);
        assert_eq!(run.code, Some(1), "{args:?}: {}", run.stdout);
        assert!(run.stderr.contains(message), "{args:?}: {}", run.stderr);
    }

    ok(&dragon(&home, &["policy", "new", "p"]));
    let again = dragon(&home, &["policy", "new", "p"]);
    assert!(
        again.stderr.contains("p already exists"),
        "{}",
        again.stderr
    );

    // A case with a key no case has: the file and the key are named.
    let project = home.join("p");
    std::fs::remove_file(project.join("cases/pack.yaml")).unwrap();
    std::fs::write(project.join("cases/typo.yaml"), "nodez: []\n").unwrap();
    let run = dragon(&project, &["policy", "test", "--policy", "dragon"]);
    assert_eq!(run.code, Some(1));
    assert!(
        run.stderr
            .contains("typo.yaml is not a valid file of this kind")
            && run.stderr.contains("unknown field `nodez`"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_python_policy_project_builds_tests_and_explains_its_failures() {
    let home = home("python");
    ok(&dragon(
        &home,
        &["policy", "new", "py-most-free", "--lang", "python"],
    ));
    let project = home.join("py-most-free");
    let build = dragon(&project, &["policy", "build"]);
    ok(&build);
    assert!(
        build
            .stdout
            .contains("policy:            py-most-free 0.1.0"),
        "{}",
        build.stdout
    );
    assert!(installed("componentize-py-0.25.1"));
    let test = dragon(&project, &["policy", "test"]);
    ok(&test);
    assert!(test.stdout.contains("2 case(s) ok"), "{}", test.stdout);
    // The project's unit tests run in plain Python on the built bindings.
    let unit = Command::new("python3")
        .args(["-m", "unittest", "-q"])
        .current_dir(&project)
        .output()
        .expect("run python3 -m unittest");
    assert!(
        unit.status.success(),
        "{}",
        String::from_utf8_lossy(&unit.stderr)
    );
    replays_exactly_and_passes_the_gate(&project);

    // An exception names itself; its text shows the time and a random
    // number the policy saw, the same on every run (the call's time, a
    // seeded generator).
    let app = project.join("app.py");
    let source = std::fs::read_to_string(&app).unwrap();
    let marker = "        apply(changes)\n        top = max";
    patch(
        &project,
        "app.py",
        marker,
        "        apply(changes)\n        import random, time\n        \
         raise ValueError(f\"no room at {time.time()} {random.random()}\\x1b[2K\\rforged\")\n        top = max",
    );
    let said = failing_score_explained(&project);
    assert!(
        said.contains("(policy wrote: ValueError: no room at 0.0 "),
        "{said}"
    );
    // What it wrote is shown as data: the escape and the carriage return
    // written out, never sent to the terminal.
    assert!(said.contains(r"\u{1b}[2K\rforged"), "{said}");
    assert!(!said.chars().any(char::is_control), "{said:?}");

    // A policy that waits fails its call instead of holding the scheduler.
    std::fs::write(&app, &source).unwrap();
    patch(
        &project,
        "app.py",
        marker,
        "        apply(changes)\n        import time\n        time.sleep(3600)\n        top = max",
    );
    ok(&dragon(&project, &["policy", "build"]));
    let waited = dragon(&project, &["policy", "test"]);
    assert_eq!(waited.code, Some(1), "{}\n{}", waited.stdout, waited.stderr);
    assert!(
        waited
            .stdout
            .contains("the policy tried to wait (wasi:io/poll)"),
        "{}",
        waited.stdout
    );

    // A build that fails keeps the last good component.
    std::fs::write(&app, "this is not python(\n").unwrap();
    let broken = dragon(&project, &["policy", "build"]);
    assert_eq!(broken.code, Some(1), "{}", broken.stderr);
    assert!(
        broken
            .stderr
            .contains("componentize-py componentize failed"),
        "{}",
        broken.stderr
    );
    assert!(project.join("policy.wasm").is_file());
}

#[test]
fn a_javascript_policy_project_builds_tests_and_explains_its_failures() {
    let home = home("javascript");
    ok(&dragon(
        &home,
        &["policy", "new", "js-most-free", "--lang", "javascript"],
    ));
    let project = home.join("js-most-free");
    let build = dragon(&project, &["policy", "build"]);
    ok(&build);
    assert!(
        build
            .stdout
            .contains("policy:            js-most-free 0.1.0"),
        "{}",
        build.stdout
    );
    assert!(installed("componentize-js-0.23.0"));
    let test = dragon(&project, &["policy", "test"]);
    ok(&test);
    assert!(test.stdout.contains("2 case(s) ok"), "{}", test.stdout);
    // The project's unit tests run in plain Node.js.
    let unit = Command::new("node")
        .arg("--test")
        .current_dir(&project)
        .output()
        .expect("run node --test");
    assert!(
        unit.status.success(),
        "{}",
        String::from_utf8_lossy(&unit.stdout)
    );
    replays_exactly_and_passes_the_gate(&project);

    // An error names itself and where it was thrown; the time and random
    // number it shows are the same on every run.
    patch(
        &project,
        "app.js",
        "    apply(changes);\n    const free",
        "    apply(changes);\n    \
         throw new Error(`no room at ${Date.now()} ${Math.random()}\\x1b[2K\\x07`);\n    const free",
    );
    let said = failing_score_explained(&project);
    assert!(said.contains("(policy wrote: no room at 0 "), "{said}");
    assert!(said.contains(r"\u{1b}[2K\u{7}"), "{said}");
    assert!(!said.chars().any(char::is_control), "{said:?}");
    assert!(said.contains("(at score@app.js:"), "{said}");

    // A build that fails keeps the last good component.
    std::fs::write(project.join("app.js"), "export const policy = {").unwrap();
    let broken = dragon(&project, &["policy", "build"]);
    assert_eq!(broken.code, Some(1), "{}", broken.stderr);
    assert!(
        broken.stderr.contains("componentize-js failed"),
        "{}",
        broken.stderr
    );
    assert!(project.join("policy.wasm").is_file());
}
