//! `dragon policy test`: a project's cases (`cases/NAME.yaml`, one round
//! and one scale step each, as `dragon policy run`) against the decisions
//! expected of them (`cases/NAME.expected.yaml`, beside each case).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// A case and where its expected decisions are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseFiles {
    /// The case, as `dragon policy run --input` reads it.
    pub input: PathBuf,
    /// Its expected decisions.
    pub expected: PathBuf,
}

impl CaseFiles {
    /// The case's name: its file name without the extension.
    pub fn name(&self) -> String {
        self.input
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

const EXPECTED: &str = ".expected";

/// The cases in `dir` (`*.yaml`, `*.yml`, `*.json`, but not the expected
/// decisions), in name order.
///
/// # Errors
/// `dir` cannot be read, or holds no case.
pub fn discover(dir: &Path) -> Result<Vec<CaseFiles>> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    let mut cases = Vec::new();
    for entry in entries {
        let path = entry
            .with_context(|| format!("cannot read {}", dir.display()))?
            .path();
        let is_case = path
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json");
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !is_case || stem.ends_with(EXPECTED) {
            continue;
        }
        let expected = path.with_file_name(format!("{stem}{EXPECTED}.yaml"));
        cases.push(CaseFiles {
            input: path,
            expected,
        });
    }
    if cases.is_empty() {
        bail!(
            "{} holds no case (NAME.yaml, as `dragon policy run --input` reads)",
            dir.display()
        );
    }
    cases.sort_by(|a, b| a.input.cmp(&b.input));
    Ok(cases)
}

/// How a case's decisions compare with the expected ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Same,
    /// A unified diff, expected → actual.
    Differs(String),
    /// No expected decisions are kept yet.
    Missing,
}

/// The expected-decisions file for `decisions`, as `--bless` writes it.
pub fn render(case: &CaseFiles, decisions: &Value) -> Result<String> {
    let body = serde_norway::to_string(decisions).context("rendering the decisions as YAML")?;
    Ok(format!(
        "# The decisions expected of {}: `dragon policy test` compares, `--bless` rewrites.\n{body}",
        case.input
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    ))
}

/// Compare `decisions` with the case's expected ones.
///
/// # Errors
/// The expected file exists but cannot be read or parsed.
pub fn compare(case: &CaseFiles, decisions: &Value) -> Result<Verdict> {
    let text = match std::fs::read_to_string(&case.expected) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Verdict::Missing),
        Err(e) => {
            return Err(e).with_context(|| format!("cannot read {}", case.expected.display()));
        }
    };
    let expected: Value = serde_norway::from_str(&text)
        .with_context(|| format!("{} is not valid YAML", case.expected.display()))?;
    if &expected == decisions {
        return Ok(Verdict::Same);
    }
    // Diff the canonical renderings, so comments and layout in the kept
    // file do not show as changes.
    let old = serde_norway::to_string(&expected).context("rendering YAML")?;
    let new = serde_norway::to_string(decisions).context("rendering YAML")?;
    let diff = similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .header("expected", "actual")
        .to_string();
    Ok(Verdict::Differs(diff))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("dragon-cases-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn cases_are_found_in_name_order_without_their_expected_decisions() {
        let dir = scratch("discover");
        for f in ["b.yaml", "a.json", "a.expected.yaml", "notes.txt", "c.yml"] {
            std::fs::write(dir.join(f), "").unwrap();
        }
        let names: Vec<String> = discover(&dir)
            .unwrap()
            .iter()
            .map(CaseFiles::name)
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(
            discover(&dir).unwrap()[0].expected,
            dir.join("a.expected.yaml")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_empty_directory_is_named() {
        let dir = scratch("empty");
        let err = discover(&dir).unwrap_err().to_string();
        assert!(err.contains("holds no case"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn blessed_decisions_compare_equal_and_a_change_shows_as_a_diff() {
        let dir = scratch("compare");
        let case = CaseFiles {
            input: dir.join("x.yaml"),
            expected: dir.join("x.expected.yaml"),
        };
        let before =
            serde_json::json!({"decisions": [{"kind": "bound", "pod": "p", "node": "gpu-1"}]});
        assert_eq!(compare(&case, &before).unwrap(), Verdict::Missing);
        std::fs::write(&case.expected, render(&case, &before).unwrap()).unwrap();
        assert_eq!(compare(&case, &before).unwrap(), Verdict::Same);
        let after =
            serde_json::json!({"decisions": [{"kind": "bound", "pod": "p", "node": "gpu-2"}]});
        let Verdict::Differs(diff) = compare(&case, &after).unwrap() else {
            panic!("a changed node must differ");
        };
        assert!(
            diff.contains("-  node: gpu-1") && diff.contains("+  node: gpu-2"),
            "{diff}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
