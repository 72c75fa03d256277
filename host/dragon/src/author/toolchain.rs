//! The guest-language toolchains `dragon policy build` drives, at pinned
//! versions: the one the author names, else the project's own (a
//! JavaScript project's `npm install`), else one this command installs
//! into Dragon's cache on first use (`toolchains/` beside the compiled
//! policies), with the language's own installer.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, anyhow, bail};

use dragon_runtime::ComponentCache;

/// A tool that turns a guest-language project into a component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// componentize-py, from PyPI.
    ComponentizePy,
    /// componentize-js, from npm.
    ComponentizeJs,
}

/// Written last into an installation, so a half-finished one is redone.
const DONE: &str = ".dragon-installed";

impl Tool {
    /// The version Dragon is tested with.
    pub const fn version(self) -> &'static str {
        match self {
            Tool::ComponentizePy => "0.25.1",
            Tool::ComponentizeJs => "0.23.0",
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Tool::ComponentizePy => "componentize-py",
            Tool::ComponentizeJs => "componentize-js",
        }
    }

    /// The variable that names another executable.
    const fn env(self) -> &'static str {
        match self {
            Tool::ComponentizePy => "DRAGON_COMPONENTIZE_PY",
            Tool::ComponentizeJs => "DRAGON_COMPONENTIZE_JS",
        }
    }

    /// Where an installation keeps the executable.
    fn program_in(self, dir: &Path) -> PathBuf {
        match self {
            Tool::ComponentizePy => dir.join("venv/bin/componentize-py"),
            Tool::ComponentizeJs => dir.join("node_modules/.bin/componentize-js"),
        }
    }

    /// The executable for a build of `project`, installing it first if
    /// need be.
    ///
    /// # Errors
    /// No cache directory is known, or the installer is missing or fails.
    pub fn program(self, project: &Path) -> Result<PathBuf> {
        if let Some(program) = std::env::var_os(self.env()) {
            return Ok(program.into());
        }
        if self == Tool::ComponentizeJs {
            let own = self.program_in(project);
            if own.is_file() {
                return Ok(own);
            }
        }
        let cache = ComponentCache::default_dir().ok_or_else(|| {
            anyhow!(
                "no cache directory to install {} into (set DRAGON_CACHE_DIR or HOME), or name one in {}",
                self.name(),
                self.env()
            )
        })?;
        let dir = cache
            .join("toolchains")
            .join(format!("{}-{}", self.name(), self.version()));
        if !dir.join(DONE).is_file() {
            self.install(&dir).with_context(|| {
                format!(
                    "cannot install {} {} into {} (install it yourself and name it in {})",
                    self.name(),
                    self.version(),
                    dir.display(),
                    self.env()
                )
            })?;
        }
        Ok(self.program_in(&dir))
    }

    /// Install into `dir`, from scratch: a Python virtual environment with
    /// pip, or an npm prefix.
    fn install(self, dir: &Path) -> Result<()> {
        eprintln!(
            "installing {} {} into {} (once)",
            self.name(),
            self.version(),
            dir.display()
        );
        if dir.exists() {
            std::fs::remove_dir_all(dir)
                .with_context(|| format!("cannot remove the unfinished {}", dir.display()))?;
        }
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        match self {
            Tool::ComponentizePy => {
                let venv = dir.join("venv");
                run(
                    Command::new("python3").args(["-m", "venv"]).arg(&venv),
                    "python3",
                )?;
                run(
                    Command::new(venv.join("bin/pip"))
                        .args(["install", "--quiet", "--disable-pip-version-check"])
                        .arg(format!("componentize-py=={}", self.version())),
                    "pip",
                )?;
            }
            Tool::ComponentizeJs => run(
                Command::new("npm")
                    .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
                    .arg(dir)
                    .arg(format!(
                        "@bytecodealliance/componentize-js@{}",
                        self.version()
                    )),
                "npm",
            )?,
        }
        std::fs::write(dir.join(DONE), self.version())
            .with_context(|| format!("cannot write {}", dir.join(DONE).display()))
    }
}

/// Run an installer step; its messages go to stderr.
fn run(command: &mut Command, what: &str) -> Result<()> {
    let status = command.status().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => anyhow!("{what} is not on PATH"),
        _ => anyhow!("cannot run {what}: {e}"),
    })?;
    if !status.success() {
        bail!("{what} failed ({status}; its messages are above)");
    }
    Ok(())
}
