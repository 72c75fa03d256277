//! `dragon-scheduler`: connects Dragon's scheduling framework to a
//! Kubernetes API server. The shim only translates: every scheduling
//! decision is the host framework's.
//!
//! - [`translate`] / [`quantity`]: Kubernetes objects → framework types;
//! - [`snapshot`]: watch events → the framework's snapshot (pure, testable);
//! - [`kube_io`]: the framework's `Binder`/`Scaler` over the API, with an
//!   optional client-side rate limit ([`ratelimit`]) and the client's
//!   retry policy for an API server that refuses for load ([`retry`]);
//! - [`reload`]: hot reload of the policy file; [`metrics`] and [`http`];
//! - [`run`]: the wiring (watches, scheduling thread, leader election).

pub mod config;
pub mod group_status;
pub mod http;
pub mod kube_io;
pub mod leader;
pub mod metrics;
pub mod quantity;
pub mod ratelimit;
pub mod reload;
pub mod retry;
pub mod run;
pub mod snapshot;
pub mod translate;
