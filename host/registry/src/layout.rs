//! The wasm OCI artifact layout (CNCF TAG Runtime's "Wasm OCI Artifact"):
//! what `wkg`, wasmtime's and Spin's registry clients and `oras` read.

use serde::{Deserialize, Serialize};

/// The manifest: a plain OCI image manifest.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// Its config: what the component is.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// Its one layer: the component's bytes.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The file name a client that writes layers to files (`oras pull`) gives
/// the component.
pub const LAYER_FILE_NAME: &str = "policy.wasm";
/// The annotation that names the policy (its `info().name`) on the
/// manifest, and the file on the layer.
pub const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";
/// The annotation that carries the policy's version.
pub const VERSION_ANNOTATION: &str = "org.opencontainers.image.version";

/// The interfaces a component imports and exports, as `ns:pkg/iface@ver`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentWorld {
    pub exports: Vec<String>,
    pub imports: Vec<String>,
    #[serde(default)]
    pub target: Option<String>,
}

/// The config blob.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WasmConfig {
    pub created: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    pub architecture: String,
    pub os: String,
    pub layer_digests: Vec<String>,
    #[serde(default)]
    pub component: Option<ComponentWorld>,
}

impl WasmConfig {
    /// The config of a component whose layer has `layer_digest`.
    pub fn component(layer_digest: String, world: ComponentWorld) -> WasmConfig {
        WasmConfig {
            created: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            author: None,
            architecture: "wasm".into(),
            os: "wasip2".into(),
            layer_digests: vec![layer_digest],
            component: Some(world),
        }
    }
}
