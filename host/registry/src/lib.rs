//! Policies in OCI registries.
//!
//! A policy travels as the wasm OCI artifact other wasm tools read (wkg,
//! wasmtime's and Spin's registries, `oras`): an OCI image manifest whose
//! config is `application/vnd.wasm.config.v0+json` and whose one layer is
//! the component, `application/wasm`. This crate pushes such an artifact,
//! resolves a tag to its manifest digest, and pulls it back with every
//! digest checked and the size bounded; `dragon policy push|pull` and
//! dragon-scheduler's `policy: oci://…` are built on it.
//!
//! - [`reference`]: `oci://registry/repository:tag` or `…@sha256:…`.
//! - [`credentials`]: who we are to a registry, from a docker config file
//!   (what a `kubernetes.io/dockerconfigjson` Secret holds).
//! - [`layout`]: the artifact's media types and config.
//! - [`client`]: push, resolve, pull.

pub mod client;
pub mod credentials;
pub mod error;
pub mod layout;
pub mod reference;

pub use client::{Pulled, Pushed, Registry, RegistryOptions};
pub use credentials::Credentials;
pub use error::Error;
pub use layout::ComponentWorld;
pub use reference::PolicyRef;
