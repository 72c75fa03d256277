//! Dragon's local harness: what a policy author runs without a cluster.
//!
//! - [`runtime`] (the `dragon-runtime` crate, re-exported): the wasmtime
//!   engine, loading and validating policy components, per-call limits, the
//!   hot-swappable [`runtime::PolicySlot`].
//! - [`framework`] (the `dragon-framework` crate, re-exported): the
//!   scheduling cycle over a cluster snapshot (queue order → pre-filter →
//!   filters → score → reserve → permit → bind) and the scale step. The
//!   simulator and `dragon-scheduler` both drive it; `dragon-scheduler`
//!   depends on those two crates only, not on this one.
//! - [`sim`]: the trace-driven cluster simulator (`dragon simulate`, `compare`).
//! - [`case`]: one-round scheduling cases for `dragon policy run`.
//! - [`author`]: a policy project from `dragon policy new` to a tested
//!   component (`build`, `test`).
//! - [`cli`]: the `dragon` command.

pub mod author;
pub mod case;
pub mod cli;
pub mod sim;
pub mod spec;

pub use dragon_framework as framework;
pub use dragon_framework::record;
pub use dragon_runtime as runtime;
