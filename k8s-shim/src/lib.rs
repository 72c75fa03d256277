//! `dragon-scheduler`: connects Dragon's scheduling framework to a
//! Kubernetes API server. The shim only translates: every scheduling
//! decision is the host framework's.
//!
//! Built so far: the translation of Kubernetes objects (nodes, pods,
//! scheduler-plugins PodGroups, Dragon's annotations) into the framework's
//! snapshot. The API client loop (watch, bind, scale, reload, leader
//! election, metrics) is issue 4's remaining work.

pub mod quantity;
pub mod translate;
