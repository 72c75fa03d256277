//! `dragon policy new`, `build` and `test`: the wiring of [`crate::author`].

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::author::cases::{self, Verdict};
use crate::author::scaffold::{self, Lang, Sdk};
use crate::author::{CASES_DIR, COMPONENT_FILE, build};
use crate::case::Case;
use dragon_runtime::{Limits, PolicySource};

use super::load::PolicyArgs;

#[derive(Debug, Args)]
pub struct NewOpts {
    /// The policy's name: a crate or package name (letters, digits, `-`, `_`).
    pub name: String,
    /// The language to write it in.
    #[arg(long, value_enum, default_value = "rust")]
    pub lang: Lang,
    /// Where to create the project (default: `./NAME`; must not exist).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Build against this `dragon-policy-sdk` (a clone's `plugin/sdk`)
    /// instead of the copy written into the project.
    #[arg(long, value_name = "PATH")]
    pub sdk: Option<PathBuf>,
}

impl NewOpts {
    pub fn run(self) -> Result<()> {
        scaffold::check_name(&self.name)
            .with_context(|| format!("{:?} cannot name a policy", self.name))?;
        let sdk = match &self.sdk {
            Some(path) => scaffold::sdk_at(path)?,
            None => Sdk::Embedded,
        };
        let dir = self.dir.unwrap_or_else(|| PathBuf::from(&self.name));
        scaffold::write(&dir, &scaffold::files(&self.name, self.lang, &sdk))?;
        println!("wrote {} (a {:?} policy project)", dir.display(), self.lang);
        println!(
            "next: cd {} && dragon policy build && dragon policy test",
            dir.display()
        );
        Ok(())
    }
}

#[derive(Debug, Args)]
pub struct BuildOpts {
    /// The project's directory.
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// Print the check as JSON.
    #[arg(long)]
    pub json: bool,
}

impl BuildOpts {
    pub fn run(self) -> Result<()> {
        let bytes = build::build(&self.dir)?;
        let out = self.dir.join(COMPONENT_FILE);
        // Checked before it is written: a policy that does not load never
        // replaces the last good build.
        let policy = policy_args(&out.display().to_string()).load_source(
            &PolicySource::Bytes {
                origin: out.display().to_string(),
                bytes: bytes.clone(),
            },
            String::new(),
        )?;
        write_atomically(&out, &bytes)?;
        if !self.json {
            println!("wrote {} ({} bytes)", out.display(), bytes.len());
        }
        super::load::print_check(&policy, self.json)
    }
}

#[derive(Debug, Args)]
pub struct TestOpts {
    /// The project's directory: its cases are in `cases/`.
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// The component to test, or a bundled policy's name (default: the
    /// project's `policy.wasm`, as `dragon policy build` writes it).
    #[arg(long)]
    pub policy: Option<String>,
    /// Keep the decisions as they are now as the expected ones.
    #[arg(long)]
    pub bless: bool,
    /// Exit 0 even when hook calls failed (as `dragon policy run`).
    #[arg(long)]
    pub allow_failures: bool,
}

impl TestOpts {
    pub fn run(self) -> Result<()> {
        let args = match &self.policy {
            Some(policy) => policy_args(policy),
            None => {
                let component = self.dir.join(COMPONENT_FILE);
                if !component.is_file() {
                    bail!(
                        "no component at {}: run `dragon policy build` first",
                        component.display()
                    );
                }
                policy_args(&component.display().to_string())
            }
        };
        let found = cases::discover(&self.dir.join(CASES_DIR))?;
        let (mut differ, mut failures) = (0usize, 0usize);
        for case_files in &found {
            let name = case_files.name();
            let case = Case::load(&case_files.input)?;
            let policy = args
                .load_with(&case.settings_json())
                .with_context(|| format!("with the settings of {}", case_files.input.display()))?;
            let outcome = case
                .run(&policy)
                .with_context(|| format!("in {}", case_files.input.display()))?;
            failures += outcome.failures();
            let decisions = outcome.decisions();
            let verdict = cases::compare(case_files, &decisions)?;
            match (&verdict, self.bless) {
                (Verdict::Same, _) => println!("case {name}: ok"),
                (_, true) => {
                    write_atomically(
                        &case_files.expected,
                        cases::render(case_files, &decisions)?.as_bytes(),
                    )?;
                    println!("case {name}: blessed ({})", case_files.expected.display());
                }
                (Verdict::Missing, false) => {
                    differ += 1;
                    println!(
                        "case {name}: no expected decisions at {} (`--bless` keeps these)",
                        case_files.expected.display()
                    );
                }
                (Verdict::Differs(diff), false) => {
                    differ += 1;
                    println!(
                        "case {name}: decisions differ from {}",
                        case_files.expected.display()
                    );
                    print!("{diff}");
                }
            }
        }
        if differ > 0 {
            bail!(
                "{differ} of {} case(s) differ from their expected decisions (`dragon policy test --bless` accepts them)",
                found.len()
            );
        }
        println!("{} case(s) ok", found.len());
        if failures > 0 && !self.allow_failures {
            return Err(super::HookCallsFailed(failures).into());
        }
        Ok(())
    }
}

/// A policy with the default limits, compiled through the cache as any.
fn policy_args(policy: &str) -> PolicyArgs {
    PolicyArgs {
        policy: policy.to_string(),
        settings: None,
        deadline_ms: Limits::default().deadline_ms,
        no_cache: false,
    }
}

/// Write `bytes` to `path` so that a reader never sees half of it.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    dragon_runtime::write_atomically(path, bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}
