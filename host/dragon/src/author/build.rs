//! `dragon policy build`: a policy project into `policy.wasm`, with no tool
//! beyond the language's own: cargo for Rust (the component encoding runs
//! in-process), componentize-py for Python, componentize-js for
//! JavaScript.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, anyhow, bail};

use super::toolchain::Tool;

#[path = "../../../bundled/wasm_build.rs"]
mod wasm_build;

/// What a project is written in, from the files at its root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectKind {
    /// A crate: `Cargo.toml`.
    Rust,
    /// A componentize-py application: `app.py` beside `wit/`.
    Python,
    /// A componentize-js module: `app.js` beside `wit/`.
    Javascript,
}

/// The kind of project in `dir`.
///
/// # Errors
/// `dir` holds no project Dragon knows how to build.
pub fn project_kind(dir: &Path) -> Result<ProjectKind> {
    if dir.join("Cargo.toml").is_file() {
        return Ok(ProjectKind::Rust);
    }
    if dir.join(super::WIT_DIR).is_dir() {
        if dir.join(PYTHON_APP).is_file() {
            return Ok(ProjectKind::Python);
        }
        if dir.join(JAVASCRIPT_APP).is_file() {
            return Ok(ProjectKind::Javascript);
        }
    }
    if !dir.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    bail!(
        "{} holds no policy project (no Cargo.toml, nor app.py or app.js beside wit/); `dragon policy new NAME` writes one",
        dir.display()
    )
}

/// Build the project in `dir` and encode it as a component; returns the
/// component's bytes (not yet written anywhere).
///
/// # Errors
/// The toolchain is missing, the build fails (its messages went to
/// stderr), or the module is not a policy.
pub fn build(dir: &Path) -> Result<Vec<u8>> {
    match project_kind(dir)? {
        ProjectKind::Rust => {
            let module = cargo_build(dir)?;
            let bytes = std::fs::read(&module)
                .with_context(|| format!("cannot read {}", module.display()))?;
            wasm_build::encode(&bytes).map_err(|e| {
                anyhow!(
                    "{} is not a policy module: {e} (does the crate call `export_policy!`?)",
                    module.display()
                )
            })
        }
        ProjectKind::Python => componentize_py(dir),
        ProjectKind::Javascript => componentize_js(dir),
    }
}

/// A JavaScript project's module, which `dragon policy new` writes.
const JAVASCRIPT_APP: &str = "app.js";

/// The component of a JavaScript project. HTTP and the fetch event are
/// left out: the host serves neither.
fn componentize_js(dir: &Path) -> Result<Vec<u8>> {
    let program = Tool::ComponentizeJs.program(dir)?;
    let out = format!(".policy.wasm.build-{}", std::process::id());
    let status = Command::new(&program)
        .current_dir(dir)
        .arg(JAVASCRIPT_APP)
        .args(["--wit", super::WIT_DIR, "--world-name", "scheduling-policy"])
        .args(["--disable", "http", "fetch-event", "--out", &out])
        .stdout(Stdio::null())
        .status()
        .map_err(|e| anyhow!("cannot run {}: {e}", program.display()));
    let path = dir.join(&out);
    let bytes = status.and_then(|status| {
        if !status.success() {
            bail!(
                "componentize-js failed in {} (its messages are above): fix them and run `dragon policy build` again",
                dir.display()
            );
        }
        std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))
    });
    let _ = std::fs::remove_file(&path);
    bytes
}

/// A Python project's module, which `dragon policy new` writes.
const PYTHON_APP: &str = "app.py";

/// Where the bindings for plain-Python unit tests go.
const PYTHON_BINDINGS: &str = "bindings";

/// Run `program` (componentize-py) with `args` in `dir`; its messages go
/// to stderr.
fn run_componentize_py(program: &Path, dir: &Path, args: &[&str]) -> Result<()> {
    let status = Command::new(program)
        .current_dir(dir)
        .args(["-d", super::WIT_DIR, "-w", "scheduling-policy"])
        .args(args)
        .stdout(Stdio::null())
        .status()
        .map_err(|e| anyhow!("cannot run {}: {e}", program.display()))?;
    if !status.success() {
        bail!(
            "componentize-py {} failed in {} (its messages are above): fix them and run `dragon policy build` again",
            args.first().copied().unwrap_or_default(),
            dir.display()
        );
    }
    Ok(())
}

/// The bindings (for the unit tests), then the component, of a Python
/// project.
fn componentize_py(dir: &Path) -> Result<Vec<u8>> {
    let program = Tool::ComponentizePy.program(dir)?;
    // componentize-py writes bindings only into a directory that is not
    // there; they are generated, so the last ones go.
    let bindings = dir.join(PYTHON_BINDINGS);
    if bindings.exists() {
        std::fs::remove_dir_all(&bindings)
            .with_context(|| format!("cannot remove the old {}", bindings.display()))?;
    }
    run_componentize_py(&program, dir, &["bindings", PYTHON_BINDINGS])?;
    // Written beside the project's files and removed once read, so a failed
    // build leaves the last good `policy.wasm` alone.
    let out = format!(".policy.wasm.build-{}", std::process::id());
    let module = PYTHON_APP.trim_end_matches(".py");
    let built = run_componentize_py(&program, dir, &["componentize", module, "-o", &out]);
    let path = dir.join(&out);
    let bytes = built.and_then(|()| {
        std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))
    });
    let _ = std::fs::remove_file(&path);
    bytes
}

/// `cargo build --release` for the wasm target; the path of the crate's
/// cdylib module.
fn cargo_build(dir: &Path) -> Result<PathBuf> {
    wasm_build::ensure_target(dir)?;
    let manifest = dir
        .join("Cargo.toml")
        .canonicalize()
        .with_context(|| format!("cannot read {}/Cargo.toml", dir.display()))?;
    let mut child = Command::new("cargo")
        .current_dir(dir)
        .args([
            "build",
            "--release",
            "--lib",
            "--target",
            wasm_build::TARGET,
        ])
        .arg("--message-format=json-render-diagnostics")
        .arg("--manifest-path")
        .arg(&manifest)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => anyhow!(
                "cannot run cargo: it is not on PATH (install Rust with rustup: https://rustup.rs)"
            ),
            _ => anyhow!("cannot run cargo: {e}"),
        })?;
    let stdout = child.stdout.take().context("cargo's output")?;
    let mut module = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading cargo's output")?;
        let Ok(message) = serde_json::from_str::<Artifact>(&line) else {
            continue;
        };
        if message.reason == "compiler-artifact"
            && message.manifest_path.as_deref() == Some(manifest.as_path())
            && message.target.kind.iter().any(|k| k == "cdylib")
        {
            module = message
                .filenames
                .into_iter()
                .find(|f| f.extension().is_some_and(|e| e == "wasm"));
        }
    }
    let status = child.wait().context("waiting for cargo")?;
    if !status.success() {
        bail!(
            "cargo build failed in {} (the compiler's messages are above): fix them and run `dragon policy build` again",
            dir.display()
        );
    }
    module.with_context(|| {
        format!(
            "{} builds no wasm module: its [lib] needs crate-type = [\"rlib\", \"cdylib\"]",
            manifest.display()
        )
    })
}

/// The parts of cargo's JSON messages the build reads.
#[derive(Debug, serde::Deserialize)]
struct Artifact {
    reason: String,
    #[serde(default)]
    manifest_path: Option<PathBuf>,
    #[serde(default)]
    target: ArtifactTarget,
    #[serde(default)]
    filenames: Vec<PathBuf>,
}

#[derive(Debug, Default, serde::Deserialize)]
struct ArtifactTarget {
    #[serde(default)]
    kind: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_without_a_project_is_named() {
        let err = project_kind(Path::new(env!("CARGO_MANIFEST_DIR")).join("src").as_path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("holds no policy project"), "{err}");
        let err = project_kind(Path::new("/nonexistent/dir"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not a directory"), "{err}");
    }
}
