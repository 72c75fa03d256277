//! `dragon-scheduler`: connects Dragon's scheduling framework to a
//! Kubernetes API server. The shim only translates: every scheduling
//! decision is the host framework's.
//!
//! - [`translate`] / [`quantity`]: Kubernetes objects → framework types;
//! - [`snapshot`]: watch events → the framework's snapshot (pure, testable);
//! - [`scheduling`]: the loop that owns the snapshot, runs rounds and the
//!   scale step, and tells the cluster what they decided;
//! - [`cluster_io`]: every request the loop makes, as one trait;
//!   [`kube_io`] sends them over a kube client, with an optional client-side
//!   rate limit ([`ratelimit`]) and the client's retry policy for an API
//!   server that refuses for load ([`retry`]); [`apply`] sends a round's
//!   binds together and Events and PodGroup statuses off the loop;
//! - [`reload`]: hot reload of the policy file; [`oci_policy`]: a policy
//!   in an OCI registry, its tag polled for a hot reload; [`metrics`] and
//!   [`http`]; [`insight`]: what `kubectl dragon` asks (why a pod waits
//!   and when it may start, `top`, the policy), authorized as the asker;
//! - [`run`]: the wiring (watches, the loop, leader election).

pub mod apply;
mod clock;
pub mod cluster_io;
pub mod config;
pub mod fence;
#[cfg(test)]
mod fixtures;
pub mod flight;
pub mod group_status;
pub mod http;
pub mod insight;
pub mod key;
pub mod kube_io;
pub mod leader;
pub mod metrics;
pub mod oci_policy;
pub use dragon_framework::quantity;
pub mod ratelimit;
pub mod reload;
pub mod retry;
pub mod run;
pub mod scheduling;
pub mod shadow;
pub mod snapshot;
pub mod taps;
pub mod translate;
pub mod watch;
