//! The wasm side of the host: one shared engine, loading and validating
//! policy components of every served interface version, per-call limits,
//! a capability-free, deterministic WASI for components that import it,
//! and the hot-swappable policy slot.

mod adapt;
mod bindings;
pub mod bounds;
mod cache;
mod engine;
mod error;
mod hooks;
mod limits;
mod load;
mod observed;
mod policy;
mod slot;
mod store;
pub mod view;
mod wasi;

pub use bindings::wit;
pub use cache::{ComponentCache, write_atomically};
pub use engine::PolicyEngine;
pub use error::{CallError, Failure, HookName, LoadError};
pub use hooks::{Hooks, PolicyInfo, hook_name};
pub use limits::Limits;
pub use load::{INTERFACE_VERSION, INTERFACE_VERSIONS, PolicySource, sha256_hex};
pub use observed::{Observed, Observer};
pub use policy::{LoadOptions, WasmPolicy};
pub use slot::{PolicySlot, SwapReport};
pub use view::{ClusterView, FixedView, QueueRow};
