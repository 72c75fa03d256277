//! The `dragon` command: what a policy author runs without a cluster.
//!
//! - [`cli`]: the subcommands (`simulate`, `compare`, `sweep`, `trace`,
//!   `replay`, `gate`, `policy …`).
//! - [`report`]: runs as tables, CSV, SVG plots and an HTML report.
//! - [`sweep`]: policies over generated traces across loads and seeds, on
//!   every core.
//! - [`case`]: one-round scheduling cases for `dragon policy run`.
//! - [`author`]: a policy project from `dragon policy new` to a tested
//!   component (`build`, `test`).
//!
//! What it drives lives in the crates dragon-scheduler shares:
//! `dragon-runtime` (the wasmtime engine and policy loading),
//! `dragon-framework` (the scheduling cycle) and `dragon-sim` (the
//! simulator, its traces and workloads).

pub mod author;
pub mod case;
pub mod cli;
pub mod report;
pub mod sweep;
