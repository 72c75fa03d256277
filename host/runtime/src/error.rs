//! Typed errors for loading and calling policies.

use std::fmt;

use super::bindings::wit;

/// Why a policy could not be loaded. Every message names where the policy
/// came from (`origin`: a path, a bundled name or `<bytes>`).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read policy {origin}: {cause}")]
    Read {
        origin: String,
        cause: std::io::Error,
    },
    /// Not WebAssembly at all.
    #[error("{origin} is not a WebAssembly binary (it does not start with the \\0asm magic)")]
    NotWasm { origin: String },
    /// A core module rather than a component.
    #[error(
        "{origin} is a core WebAssembly module, not a component: encode it with `wasm-tools component new` \
         (the README's \"Writing a policy\" shows the build)"
    )]
    CoreModule { origin: String },
    /// wasmtime refused to compile it.
    #[error("{origin} is not a valid component: {cause}")]
    Invalid { origin: String, cause: String },
    /// A component, but not of the policy world.
    #[error(
        "{origin} is not a Dragon policy: it exports no dragon:scheduler/policy interface (it exports: {exports})"
    )]
    NotAPolicy { origin: String, exports: String },
    /// Built against an interface version this host does not speak.
    #[error(
        "{origin} was built against dragon:scheduler@{found}, but this host serves {supported} \
         (a policy must match one of them in major and minor version)"
    )]
    Version {
        origin: String,
        found: String,
        supported: String,
    },
    /// Wants something the host does not give.
    #[error(
        "{origin} imports {import}, which Dragon does not provide (a policy gets only dragon:scheduler/host.log, and WASI 0.2 without files, network or a real clock)"
    )]
    Import { origin: String, import: String },
    /// The policy refused its settings.
    #[error("{origin} ({policy}) refused its settings: {message}")]
    Settings {
        origin: String,
        policy: String,
        message: String,
    },
    /// A call made while loading failed.
    #[error("{origin} failed its load-time check: {cause}")]
    Smoke { origin: String, cause: CallError },
    /// The policy's metadata is unusable.
    #[error("{origin} has invalid metadata: {message}")]
    Metadata { origin: String, message: String },
    /// Instantiation failed for another reason.
    #[error("{origin} could not be instantiated: {cause}")]
    Instantiate { origin: String, cause: String },
    /// The digest is not one the configuration allows.
    #[error(
        "{origin} has SHA-256 {found}, which the configuration does not allow (allowed: {allowed})"
    )]
    Digest {
        origin: String,
        found: String,
        allowed: String,
    },
}

/// A function of the policy world the host calls: the interface's hooks,
/// and `metadata`, `configure` and instantiation, which precede them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HookName {
    Instantiate,
    Metadata,
    Configure,
    QueueOrder,
    PreFilter,
    Filter,
    Score,
    Permit,
    Scale,
}

impl HookName {
    /// The WIT name (`queue-order`, `pre-filter`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            HookName::Instantiate => "instantiate",
            HookName::Metadata => "metadata",
            HookName::Configure => "configure",
            HookName::QueueOrder => "queue-order",
            HookName::PreFilter => "pre-filter",
            HookName::Filter => "filter",
            HookName::Score => "score",
            HookName::Permit => "permit",
            HookName::Scale => "scale",
        }
    }
}

impl From<wit::Hook> for HookName {
    fn from(hook: wit::Hook) -> HookName {
        match hook {
            wit::Hook::QueueOrder => HookName::QueueOrder,
            wit::Hook::PreFilter => HookName::PreFilter,
            wit::Hook::Filter => HookName::Filter,
            wit::Hook::Score => HookName::Score,
            wit::Hook::Permit => HookName::Permit,
            wit::Hook::Scale => HookName::Scale,
        }
    }
}

impl fmt::Display for HookName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A call into a policy that did not produce a usable result.
#[derive(Debug, Clone, thiserror::Error)]
#[error("policy `{policy}` failed in `{hook}`: {failure}")]
pub struct CallError {
    /// The policy's name.
    pub policy: String,
    /// The hook (WIT function) that failed.
    pub hook: HookName,
    /// What went wrong.
    pub failure: Failure,
}

/// The cause of a [`CallError`].
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// Ran past its deadline and was interrupted.
    Timeout { deadline_ms: u64 },
    /// Tried to grow memory past the cap.
    MemoryLimit { bytes: usize },
    /// Trapped (panic, unreachable, stack overflow, ...).
    Trap(String),
    /// Returned something the host cannot use.
    InvalidOutput(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Timeout { deadline_ms } => {
                write!(f, "timed out after {deadline_ms} ms and was interrupted")
            }
            Failure::MemoryLimit { bytes } => write!(f, "hit the memory limit of {bytes} bytes"),
            Failure::Trap(msg) => write!(f, "trapped: {msg}"),
            Failure::InvalidOutput(msg) => write!(f, "returned an invalid result: {msg}"),
        }
    }
}
