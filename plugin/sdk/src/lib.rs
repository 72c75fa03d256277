//! The SDK for Dragon scheduling policies.
//!
//! A policy is plain Rust: implement [`Policy`] on a type with a `Default`,
//! test it natively with ordinary `#[test]`s, and export it to the
//! `dragon:scheduler/policy` WIT interface with [`export_policy!`]:
//!
//! ```ignore
//! use dragon_policy_sdk::{Policy, policy, types::*};
//!
//! #[derive(Default)]
//! struct Spread;
//!
//! // `#[policy]` names the hooks from the methods below: here `score`.
//! #[policy]
//! impl Policy for Spread {
//!     fn metadata(&self) -> PolicyInfo {
//!         PolicyInfo::named("spread", "0.1.0")
//!     }
//!     // The emptiest node first: `view` holds every node's row.
//!     fn score_node(&self, _pod: &Placement, node: NodeIndex, view: &View) -> u32 {
//!         view.free(node).gpus
//!     }
//! }
//!
//! dragon_policy_sdk::export_policy!(Spread);
//! ```
//!
//! Build with `cargo build --target wasm32-unknown-unknown` and encode the
//! module as a component (the workspace's `host/bundled` build script shows
//! how; `dragon policy check` validates the result).

// `#[policy]` names the SDK by its crate name, here as anywhere else.
extern crate self as dragon_policy_sdk;

pub mod bindings {
    //! Bindings generated from `wit/v0.4/scheduler.wit`. Policy authors
    //! rarely need this module: [`crate::types`] re-exports the shapes.
    wit_bindgen::generate!({
        world: "scheduling-policy",
        path: "../../wit/v0.4",
        pub_export_macro: true,
        export_macro_name: "__export_scheduling_policy",
        default_bindings_module: "dragon_policy_sdk::bindings",
        additional_derives: [serde::Serialize, serde::Deserialize, PartialEq],
    });
}

pub mod elastic;
pub mod fair;
mod glue;
mod helpers;
mod log;
pub mod packing;
mod policy;
pub mod rules;
pub mod testing;
mod view;

pub use dragon_policy_sdk_macros::policy;
pub use log::log;
pub use policy::{NoSettings, Policy, Refusal};

#[doc(hidden)]
pub use glue::{__policy_call, __policy_call_mut, __policy_view, __refused};

/// The interface version this SDK builds policies against.
pub const INTERFACE_VERSION: &str = "0.4.0";

/// The shapes a policy receives and returns (see `wit/v0.4/scheduler.wit`
/// for every field's meaning), and the view of the cluster it keeps.
pub mod types {
    pub use crate::bindings::dragon::scheduler::types::*;
    pub use crate::helpers::{Runs, fits_count};
    pub use crate::view::{Capacity, HOSTNAME_LEVEL, NodeIndex, View};
}

/// Export a type implementing [`Policy`] + `Default` as the component's
/// `dragon:scheduler/policy` implementation. On a native target this expands
/// to nothing, so the same crate also builds and tests natively.
#[macro_export]
macro_rules! export_policy {
    ($policy:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            use $crate::bindings::exports::dragon::scheduler::policy::Guest;
            use $crate::types::*;

            struct __DragonExport;

            impl Guest for __DragonExport {
                fn metadata() -> PolicyInfo {
                    $crate::__policy_call::<$policy, _>(|p| $crate::Policy::info(p))
                }
                fn configure(settings: String) -> Result<(), String> {
                    $crate::__policy_call_mut::<$policy, _>(|p| $crate::Policy::configure_json(p, &settings).map_err(|r| r.to_string()))
                }
                fn queue_order(changes: Changes, now_ms: u64, units: Vec<Queued>) -> Vec<u32> {
                    $crate::__policy_view::<$policy, _>(&changes, |p, v| $crate::Policy::queue_order(p, now_ms, &units, v))
                }
                fn pre_filter(changes: Changes, now_ms: u64, unit: Unit) -> PreFilterResult {
                    $crate::__policy_view::<$policy, _>(&changes, |p, v| $crate::Policy::pre_filter(p, now_ms, &unit, v))
                }
                fn filter(changes: Changes, pod: Placement, nodes: Candidates) -> Vec<u32> {
                    let verdicts = $crate::__policy_view::<$policy, _>(&changes, |p, v| $crate::Policy::filter(p, &pod, &nodes, v));
                    $crate::__refused(verdicts, nodes.index.len())
                }
                fn score(changes: Changes, pod: Placement, nodes: Candidates) -> Vec<u32> {
                    $crate::__policy_view::<$policy, _>(&changes, |p, v| $crate::Policy::score(p, &pod, &nodes, v))
                }
                fn permit(now_ms: u64, gang: GangState) -> PermitResult {
                    $crate::__policy_call::<$policy, _>(|p| $crate::Policy::permit(p, now_ms, &gang))
                }
                fn scale(changes: Changes, input: ScaleInput) -> Vec<ScaleDecision> {
                    $crate::__policy_view::<$policy, _>(&changes, |p, v| $crate::Policy::scale(p, &input, v))
                }
            }

            $crate::bindings::__export_scheduling_policy!(__DragonExport with_types_in $crate::bindings);
        };
    };
}
