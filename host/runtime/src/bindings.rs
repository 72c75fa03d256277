//! Host bindings generated from each interface version the host serves
//! (`wit/v0.1` to `wit/v0.4`).

/// `dragon:scheduler@0.1.0`: its shapes are also the framework's own (see
/// [`wit`]), so a 0.1 policy is called with them as they are.
pub mod v0_1 {
    wasmtime::component::bindgen!({
        world: "scheduling-policy",
        path: "../../wit/v0.1",
        additional_derives: [serde::Serialize, serde::Deserialize, PartialEq],
    });
}

/// `dragon:scheduler@0.2.0`: the policy keeps a view of the nodes; calls
/// carry changes (see `adapt`).
pub mod v0_2 {
    wasmtime::component::bindgen!({
        world: "scheduling-policy",
        path: "../../wit/v0.2",
        additional_derives: [PartialEq],
    });
}

/// `dragon:scheduler@0.3.0`: 0.2 with topology levels and queues in the
/// view (see `adapt`).
pub mod v0_3 {
    wasmtime::component::bindgen!({
        world: "scheduling-policy",
        path: "../../wit/v0.3",
        additional_derives: [PartialEq],
    });
}

/// `dragon:scheduler@0.4.0`: 0.3 with GPU types and speed-ups (see
/// `adapt`).
pub mod v0_4 {
    wasmtime::component::bindgen!({
        world: "scheduling-policy",
        path: "../../wit/v0.4",
        additional_derives: [PartialEq],
    });
}

/// The shapes the framework speaks to every policy in: 0.1's records (a 0.2
/// policy is adapted from them and a [`crate::ClusterView`]).
pub mod wit {
    pub use super::v0_1::dragon::scheduler::types::*;
}
