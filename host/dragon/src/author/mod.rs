//! What a policy author runs from an empty directory to a tested
//! component: `dragon policy new` writes a project ([`scaffold`]),
//! `dragon policy build` turns it into `policy.wasm` ([`build`]), and
//! `dragon policy test` runs its cases against the decisions kept beside
//! them ([`cases`]).

pub mod build;
pub mod cases;
pub mod scaffold;
pub mod toolchain;

/// Where `dragon policy build` writes the component, in the project's
/// directory, and where `dragon policy test` looks for it (the name is the
/// key dragon-scheduler's ConfigMap uses too).
pub const COMPONENT_FILE: &str = "policy.wasm";

/// The directory of a project's cases.
pub const CASES_DIR: &str = "cases";

/// The directory of a Python project's interface (WIT).
pub const WIT_DIR: &str = "wit";
