//! The SDK for Dragon scheduling policies.
//!
//! A policy is plain Rust: implement [`Policy`] on a type with a `Default`,
//! test it natively with ordinary `#[test]`s, and export it to the
//! `dragon:scheduler/policy` WIT interface with [`export_policy!`]:
//!
//! ```ignore
//! use dragon_policy_sdk::{Policy, types::*};
//!
//! #[derive(Default)]
//! struct Spread;
//!
//! impl Policy for Spread {
//!     fn metadata(&self) -> PolicyInfo {
//!         PolicyInfo::new("spread", "0.1.0", &[Hook::Score])
//!     }
//!     fn score(&self, _pod: &Placement, nodes: &Candidates) -> Vec<u32> {
//!         nodes.capacity.free_gpus.clone()
//!     }
//! }
//!
//! dragon_policy_sdk::export_policy!(Spread);
//! ```
//!
//! Build with `cargo build --target wasm32-unknown-unknown` and encode the
//! module as a component (the workspace's `host/bundled` build script shows
//! how; `dragon policy check` validates the result).

pub mod bindings {
    //! Bindings generated from `wit/scheduler.wit`. Policy authors rarely
    //! need this module: [`crate::types`] re-exports the shapes.
    wit_bindgen::generate!({
        world: "scheduling-policy",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "__export_scheduling_policy",
        default_bindings_module: "dragon_policy_sdk::bindings",
        additional_derives: [serde::Serialize, serde::Deserialize, PartialEq],
    });
}

mod glue;
mod helpers;
mod log;
mod policy;

pub use log::log;
pub use policy::Policy;

#[doc(hidden)]
pub use glue::{__policy_call, __policy_call_mut};

/// The interface version this SDK builds policies against.
pub const INTERFACE_VERSION: &str = "0.1.0";

/// The shapes a policy receives and returns (see `wit/scheduler.wit` for
/// every field's meaning).
pub mod types {
    pub use crate::bindings::dragon::scheduler::types::*;
    pub use crate::helpers::fits_count;
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
                    $crate::__policy_call::<$policy, _>(|p| $crate::Policy::metadata(p))
                }
                fn configure(settings: String) -> Result<(), String> {
                    $crate::__policy_call_mut::<$policy, _>(|p| $crate::Policy::configure(p, &settings))
                }
                fn queue_order(now_ms: u64, units: Vec<Queued>) -> Vec<u32> {
                    $crate::__policy_call::<$policy, _>(|p| $crate::Policy::queue_order(p, now_ms, &units))
                }
                fn pre_filter(now_ms: u64, unit: Unit, nodes: Capacity) -> PreFilterResult {
                    $crate::__policy_call::<$policy, _>(|p| $crate::Policy::pre_filter(p, now_ms, &unit, &nodes))
                }
                fn filter(pod: Placement, nodes: Candidates) -> Vec<bool> {
                    $crate::__policy_call::<$policy, _>(|p| $crate::Policy::filter(p, &pod, &nodes))
                }
                fn score(pod: Placement, nodes: Candidates) -> Vec<u32> {
                    $crate::__policy_call::<$policy, _>(|p| $crate::Policy::score(p, &pod, &nodes))
                }
                fn permit(now_ms: u64, gang: GangState) -> PermitResult {
                    $crate::__policy_call::<$policy, _>(|p| $crate::Policy::permit(p, now_ms, &gang))
                }
                fn scale(input: ScaleInput) -> Vec<ScaleDecision> {
                    $crate::__policy_call::<$policy, _>(|p| $crate::Policy::scale(p, &input))
                }
            }

            $crate::bindings::__export_scheduling_policy!(__DragonExport with_types_in $crate::bindings);
        };
    };
}
