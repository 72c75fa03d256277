//! Dragon's host: everything between a policy component and a cluster.
//!
//! - [`runtime`]: the wasmtime engine, loading and validating policy
//!   components, per-call limits, the hot-swappable [`runtime::PolicySlot`].
//! - [`framework`]: the scheduling cycle over a cluster snapshot (queue order
//!   → pre-filter → filters → score → reserve → permit → bind) and the scale
//!   step. The simulator and the Kubernetes shim both drive it.
//! - [`sim`]: the trace-driven cluster simulator (`dragon simulate`, `compare`).
//! - [`case`]: one-round scheduling cases for `dragon policy run`.
//! - [`cli`]: the `dragon` command.

pub mod case;
pub mod cli;
pub mod framework;
pub mod runtime;
pub mod sim;
pub mod spec;
