//! Host bindings generated from `wit/scheduler.wit`.

wasmtime::component::bindgen!({
    world: "scheduling-policy",
    path: "../../wit",
    additional_derives: [serde::Serialize, serde::Deserialize, PartialEq],
});

/// The interface's shapes as the host sees them.
pub mod wit {
    pub use super::dragon::scheduler::types::*;
}
