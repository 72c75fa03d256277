//! No code: see `Cargo.toml`. Members depend on this crate only for the
//! features it turns on in shared dependencies.
