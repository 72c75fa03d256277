//! `dragon policy new`: a ready policy project, outside any clone.
//!
//! The SDK reaches the project as source: this binary carries the SDK it
//! was built with (`plugin/sdk`, `plugin/sdk-macros`, `wit/v0.4`) and
//! writes it under `dragon-sdk/`, in the layout of Dragon's repository, so
//! the project builds with nothing but Rust and the crates.io registry.
//! `--sdk PATH` points the project at a clone's `plugin/sdk` instead.
//! Python and JavaScript projects carry the interface (`wit/`) and are
//! built by componentize-py and componentize-js.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::toolchain::Tool;

/// The languages a project can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Javascript,
}

/// Where the project's `dragon-policy-sdk` comes from.
#[derive(Debug, Clone)]
pub enum Sdk {
    /// The copy this binary carries, written into the project.
    Embedded,
    /// A clone's `plugin/sdk` directory.
    Path(PathBuf),
}

/// Where the written SDK sits in a project, in the repository's layout
/// (the SDK finds its WIT at `../../wit/v0.4`).
const EMBEDDED_SDK_DIR: &str = "dragon-sdk";

/// The SDK's files as they are in the repository, by path from its root.
/// `sdk_sources_cover_every_file` keeps the list whole.
const SDK_SOURCES: &[(&str, &str)] = &[
    (
        "plugin/sdk/src/lib.rs",
        include_str!("../../../../plugin/sdk/src/lib.rs"),
    ),
    (
        "plugin/sdk/src/elastic.rs",
        include_str!("../../../../plugin/sdk/src/elastic.rs"),
    ),
    (
        "plugin/sdk/src/fair/mod.rs",
        include_str!("../../../../plugin/sdk/src/fair/mod.rs"),
    ),
    (
        "plugin/sdk/src/fair/tree.rs",
        include_str!("../../../../plugin/sdk/src/fair/tree.rs"),
    ),
    (
        "plugin/sdk/src/glue.rs",
        include_str!("../../../../plugin/sdk/src/glue.rs"),
    ),
    (
        "plugin/sdk/src/helpers.rs",
        include_str!("../../../../plugin/sdk/src/helpers.rs"),
    ),
    (
        "plugin/sdk/src/log.rs",
        include_str!("../../../../plugin/sdk/src/log.rs"),
    ),
    (
        "plugin/sdk/src/packing.rs",
        include_str!("../../../../plugin/sdk/src/packing.rs"),
    ),
    (
        "plugin/sdk/src/policy.rs",
        include_str!("../../../../plugin/sdk/src/policy.rs"),
    ),
    (
        "plugin/sdk/src/rules.rs",
        include_str!("../../../../plugin/sdk/src/rules.rs"),
    ),
    (
        "plugin/sdk/src/testing.rs",
        include_str!("../../../../plugin/sdk/src/testing.rs"),
    ),
    (
        "plugin/sdk/src/view.rs",
        include_str!("../../../../plugin/sdk/src/view.rs"),
    ),
    (
        "plugin/sdk-macros/src/lib.rs",
        include_str!("../../../../plugin/sdk-macros/src/lib.rs"),
    ),
    (
        "wit/v0.4/scheduler.wit",
        include_str!("../../../../wit/v0.4/scheduler.wit"),
    ),
];

/// The SDK's manifests, without the workspace's inheritance (templates).
const SDK_MANIFESTS: &[(&str, &str)] = &[
    (
        "plugin/sdk/Cargo.toml",
        include_str!("templates/sdk/sdk.Cargo.toml.in"),
    ),
    (
        "plugin/sdk-macros/Cargo.toml",
        include_str!("templates/sdk/sdk-macros.Cargo.toml.in"),
    ),
];

/// The cases a new project starts with, and their expected decisions
/// (what the example policy decides: `policy_new_build_and_test_round_trip`
/// in `tests/cli.rs` builds and tests a new project).
const CASES: &[(&str, &str)] = &[
    (
        "most-free.yaml",
        include_str!("templates/cases/most-free.yaml"),
    ),
    (
        "most-free.expected.yaml",
        include_str!("templates/cases/most-free.expected.yaml"),
    ),
    ("pack.yaml", include_str!("templates/cases/pack.yaml")),
    (
        "pack.expected.yaml",
        include_str!("templates/cases/pack.expected.yaml"),
    ),
];

/// The wit-bindgen the SDK is built with (the workspace's; checked by
/// `sdk_manifest_matches_the_workspace`).
const WIT_BINDGEN: &str = "0.61";

/// The Rust the SDK is built and tested with: the repository's pin.
fn rust_channel() -> &'static str {
    include_str!("../../../../rust-toolchain.toml")
        .lines()
        .find_map(|l| l.trim().strip_prefix("channel = "))
        .map_or("stable", |v| v.trim_matches('"'))
}

/// A project's files: (path inside the project, contents).
pub type Files = Vec<(PathBuf, String)>;

/// Why a name cannot be a policy's.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NameError {
    #[error("is empty")]
    Empty,
    #[error("is {0} characters; at most 64")]
    TooLong(usize),
    #[error("must start with a letter")]
    FirstNotLetter,
    #[error("may hold only ASCII letters, digits, `-` and `_`; {0:?} is not one")]
    BadChar(char),
    #[error("is a Rust keyword or a name the toolchain reserves")]
    Reserved,
}

/// Check that `name` can name a crate, a package and the policy itself
/// (cargo's rules, kept to ASCII).
///
/// # Errors
/// The first rule the name breaks.
pub fn check_name(name: &str) -> Result<(), NameError> {
    const RESERVED: &[&str] = &[
        "as",
        "async",
        "await",
        "break",
        "const",
        "continue",
        "crate",
        "dyn",
        "else",
        "enum",
        "extern",
        "false",
        "fn",
        "for",
        "if",
        "impl",
        "in",
        "let",
        "loop",
        "match",
        "mod",
        "move",
        "mut",
        "pub",
        "ref",
        "return",
        "self",
        "static",
        "struct",
        "super",
        "trait",
        "true",
        "type",
        "unsafe",
        "use",
        "where",
        "while",
        "abstract",
        "become",
        "box",
        "do",
        "final",
        "gen",
        "macro",
        "override",
        "priv",
        "try",
        "typeof",
        "unsized",
        "virtual",
        "yield",
        "core",
        "std",
        "alloc",
        "proc_macro",
        "proc-macro",
        "test",
        "build",
        "deps",
        "examples",
        "dragon-policy-sdk",
        "dragon-policy-sdk-macros",
    ];
    let first = name.chars().next().ok_or(NameError::Empty)?;
    if name.len() > 64 {
        return Err(NameError::TooLong(name.len()));
    }
    if !first.is_ascii_alphabetic() {
        return Err(NameError::FirstNotLetter);
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_')))
    {
        return Err(NameError::BadChar(c));
    }
    if RESERVED.contains(&name) {
        return Err(NameError::Reserved);
    }
    Ok(())
}

fn fill(template: &str, vars: &[(&str, &str)]) -> String {
    vars.iter()
        .fold(template.to_string(), |text, (key, value)| {
            text.replace(&format!("{{{{{key}}}}}"), value)
        })
}

/// The files of a new project named `name` (already checked).
pub fn files(name: &str, lang: Lang, sdk: &Sdk) -> Files {
    match lang {
        Lang::Rust => rust_files(name, sdk),
        Lang::Python => python_files(name),
        Lang::Javascript => javascript_files(name),
    }
}

fn javascript_files(name: &str) -> Files {
    let vars = [
        ("name", name),
        ("componentize_js", Tool::ComponentizeJs.version()),
    ];
    let mut out: Files = vec![
        (
            "app.js".into(),
            fill(include_str!("templates/javascript/app.js.in"), &vars),
        ),
        (
            "app.test.js".into(),
            include_str!("templates/javascript/app.test.js.in").into(),
        ),
        (
            "package.json".into(),
            fill(include_str!("templates/javascript/package.json.in"), &vars),
        ),
        (
            ".gitignore".into(),
            include_str!("templates/javascript/gitignore.in").into(),
        ),
        (
            "README.md".into(),
            fill(include_str!("templates/javascript/README.md.in"), &vars),
        ),
        wit_file(),
    ];
    out.extend(cases());
    out
}

/// The interface, for projects built by a tool that reads WIT.
fn wit_file() -> (PathBuf, String) {
    let wit = SDK_SOURCES
        .iter()
        .find(|(p, _)| *p == "wit/v0.4/scheduler.wit")
        .map_or("", |(_, text)| text);
    (
        Path::new(super::WIT_DIR).join("scheduler.wit"),
        wit.to_string(),
    )
}

fn python_files(name: &str) -> Files {
    let vars = [
        ("name", name),
        ("componentize_py", Tool::ComponentizePy.version()),
    ];
    let mut out: Files = vec![
        (
            "app.py".into(),
            fill(include_str!("templates/python/app.py.in"), &vars),
        ),
        (
            "test_app.py".into(),
            include_str!("templates/python/test_app.py.in").into(),
        ),
        (
            ".gitignore".into(),
            include_str!("templates/python/gitignore.in").into(),
        ),
        (
            "README.md".into(),
            fill(include_str!("templates/python/README.md.in"), &vars),
        ),
        wit_file(),
    ];
    out.extend(cases());
    out
}

/// The cases every new project starts with.
fn cases() -> impl Iterator<Item = (PathBuf, String)> {
    CASES
        .iter()
        .map(|(file, text)| (Path::new(super::CASES_DIR).join(file), (*text).to_string()))
}

fn rust_files(name: &str, sdk: &Sdk) -> Files {
    let sdk_path = match sdk {
        Sdk::Embedded => format!("{EMBEDDED_SDK_DIR}/plugin/sdk"),
        Sdk::Path(p) => p.display().to_string(),
    };
    let vars = [
        ("name", name),
        ("sdk", sdk_path.as_str()),
        ("rust", rust_channel()),
        ("version", env!("CARGO_PKG_VERSION")),
        ("wit_bindgen", WIT_BINDGEN),
    ];
    let mut out: Files = vec![
        (
            "Cargo.toml".into(),
            fill(include_str!("templates/rust/Cargo.toml.in"), &vars),
        ),
        (
            "rust-toolchain.toml".into(),
            fill(include_str!("templates/rust/rust-toolchain.toml.in"), &vars),
        ),
        (
            ".gitignore".into(),
            include_str!("templates/rust/gitignore.in").into(),
        ),
        (
            "README.md".into(),
            fill(include_str!("templates/rust/README.md.in"), &vars),
        ),
        (
            "src/lib.rs".into(),
            fill(include_str!("templates/rust/lib.rs.in"), &vars),
        ),
    ];
    out.extend(cases());
    if let Sdk::Embedded = sdk {
        let sdk_dir = Path::new(EMBEDDED_SDK_DIR);
        for (path, text) in SDK_SOURCES {
            out.push((sdk_dir.join(path), (*text).to_string()));
        }
        for (path, template) in SDK_MANIFESTS {
            out.push((sdk_dir.join(path), fill(template, &vars)));
        }
    }
    out
}

/// Write `files` as the new directory `dir`: assembled beside it and
/// renamed into place, so a failure leaves no half-written project.
///
/// # Errors
/// `dir` exists, or a file cannot be written.
pub fn write(dir: &Path, files: &Files) -> Result<()> {
    if dir.exists() {
        bail!(
            "{} already exists: choose another name or directory",
            dir.display()
        );
    }
    let name = dir
        .file_name()
        .with_context(|| format!("{}: not a directory name", dir.display()))?;
    let staging = dir.with_file_name(format!(
        ".{}.new-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| -> Result<()> {
        for (path, text) in files {
            let path = staging.join(path);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("cannot create {}", parent.display()))?;
            }
            std::fs::write(&path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        std::fs::rename(&staging, dir)
            .with_context(|| format!("cannot move the project into {}", dir.display()))
    })();
    if written.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    written
}

/// The SDK directory `--sdk` names: a directory whose `Cargo.toml` is
/// `dragon-policy-sdk`'s, made absolute so the project may live anywhere.
///
/// # Errors
/// It is not the SDK.
pub fn sdk_at(path: &Path) -> Result<Sdk> {
    let manifest = path.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .with_context(|| format!("--sdk {}: no Cargo.toml there", path.display()))?;
    if !text.contains("name = \"dragon-policy-sdk\"") {
        bail!(
            "--sdk {}: {} is not dragon-policy-sdk's (a clone's plugin/sdk is)",
            path.display(),
            manifest.display()
        );
    }
    let absolute = path
        .canonicalize()
        .with_context(|| format!("--sdk {}", path.display()))?;
    Ok(Sdk::Path(absolute))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    #[test]
    fn sdk_sources_cover_every_file() {
        let dirs = [
            "plugin/sdk/src",
            "plugin/sdk/src/fair",
            "plugin/sdk-macros/src",
            "wit/v0.4",
        ];
        for dir in dirs {
            for entry in std::fs::read_dir(repo().join(dir)).unwrap() {
                let entry = entry.unwrap();
                if entry.file_type().unwrap().is_dir() {
                    assert!(
                        dirs.iter().any(|d| repo().join(d) == entry.path()),
                        "{} is not searched for SDK sources",
                        entry.path().display()
                    );
                    continue;
                }
                let name = format!("{dir}/{}", entry.file_name().to_string_lossy());
                assert!(
                    SDK_SOURCES.iter().any(|(p, _)| *p == name),
                    "{name} is not written by `dragon policy new`"
                );
            }
        }
    }

    #[test]
    fn sdk_manifest_matches_the_workspace() {
        let workspace = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
        assert!(
            workspace.contains(&format!("wit-bindgen = {{ version = \"{WIT_BINDGEN}\"")),
            "the workspace's wit-bindgen is not {WIT_BINDGEN}"
        );
        let sdk = std::fs::read_to_string(repo().join("plugin/sdk/Cargo.toml")).unwrap();
        let template = include_str!("templates/sdk/sdk.Cargo.toml.in");
        let deps = |text: &str| -> Vec<String> {
            let section = text.split("[dependencies]").nth(1).unwrap_or("");
            let mut names: Vec<String> = section
                .lines()
                .filter_map(|l| l.split_once(" = ").map(|(k, _)| k.trim().to_string()))
                .collect();
            names.sort();
            names
        };
        assert_eq!(deps(&sdk), deps(template));
    }

    #[test]
    fn names_follow_cargo_rules() {
        assert_eq!(check_name("my-policy_2"), Ok(()));
        assert_eq!(check_name(""), Err(NameError::Empty));
        assert_eq!(check_name("2fast"), Err(NameError::FirstNotLetter));
        assert_eq!(check_name("my policy"), Err(NameError::BadChar(' ')));
        assert_eq!(check_name("ünï"), Err(NameError::FirstNotLetter));
        assert_eq!(check_name("fn"), Err(NameError::Reserved));
        assert_eq!(check_name("test"), Err(NameError::Reserved));
        assert_eq!(check_name(&"a".repeat(65)), Err(NameError::TooLong(65)));
    }

    #[test]
    fn every_placeholder_is_filled() {
        let all = [Lang::Rust, Lang::Python, Lang::Javascript]
            .into_iter()
            .flat_map(|lang| files("p", lang, &Sdk::Embedded));
        for (path, text) in all {
            let verbatim = SDK_SOURCES
                .iter()
                .any(|(p, _)| path == Path::new(EMBEDDED_SDK_DIR).join(p));
            assert!(
                verbatim || !text.contains("{{"),
                "{} keeps a placeholder",
                path.display()
            );
        }
    }

    #[test]
    fn the_rust_channel_is_the_pinned_one() {
        assert!(rust_channel().starts_with("1."), "{}", rust_channel());
    }
}
