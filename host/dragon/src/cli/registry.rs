//! `dragon policy push` and `pull`: policies in an OCI registry, in the
//! wasm OCI artifact layout (see [`dragon_registry`]).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use dragon_registry::{ComponentWorld, Credentials, PolicyRef, Registry, RegistryOptions};

use dragon_runtime::PolicySource;

use super::load::PolicyArgs;

/// How to reach the registry.
#[derive(Debug, Args)]
pub struct RegistryArgs {
    /// A docker config file with the registry's credentials (default:
    /// `$DOCKER_CONFIG/config.json` or `~/.docker/config.json` if present).
    #[arg(long, value_name = "FILE")]
    pub registry_config: Option<PathBuf>,
    /// Speak plain HTTP to this registry host (`host:port`), e.g. one on
    /// the local machine; every other is HTTPS with its certificate verified.
    #[arg(long, value_name = "HOST")]
    pub plain_http: Vec<String>,
    /// A CA certificate (PEM) to trust besides the system's roots.
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
}

impl RegistryArgs {
    fn client(&self) -> Result<Registry> {
        let config_file = self
            .registry_config
            .clone()
            .or_else(Credentials::default_file);
        let options = RegistryOptions::from_files(
            config_file.as_deref(),
            self.ca_file.as_deref(),
            self.plain_http.clone(),
        )?;
        Ok(Registry::new(options)?)
    }
}

#[derive(Debug, Args)]
pub struct PushOpts {
    /// The policy: a `.wasm` component or a bundled name. It is loaded and
    /// checked first: a file that is not a policy is never pushed.
    pub policy: String,
    /// Where to: `oci://registry/repository:tag`.
    pub reference: String,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

#[derive(Debug, Args)]
pub struct PullOpts {
    /// What to pull: `oci://registry/repository:tag` or `…@sha256:…`.
    pub reference: String,
    /// Where to write the component (written only once it has loaded).
    #[arg(long, short, default_value = "policy.wasm")]
    pub out: PathBuf,
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// Print the check as JSON.
    #[arg(long)]
    pub json: bool,
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the registry client's runtime")
}

fn checker(policy: &str) -> PolicyArgs {
    PolicyArgs {
        policy: policy.to_string(),
        settings: None,
        deadline_ms: dragon_runtime::Limits::default().deadline_ms,
        no_cache: false,
    }
}

impl PushOpts {
    pub fn run(self) -> Result<()> {
        let reference = PolicyRef::parse(&self.reference)?;
        let source = PolicySource::named_or_file(&self.policy);
        let policy = checker(&self.policy)
            .load_source(&source, String::new())
            .with_context(|| format!("{} is not pushed", self.policy))?;
        let bytes = match &source {
            PolicySource::File(path) => {
                std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?
            }
            PolicySource::Bytes { bytes, .. } => bytes.clone(),
        };
        let world = component_world(&bytes)
            .with_context(|| format!("cannot read the world of {}", self.policy))?;
        let info = policy.info();
        let registry = self.registry.client()?;
        let pushed = runtime()?.block_on(registry.push(
            &reference,
            bytes,
            world,
            &info.name,
            &info.version,
        ))?;
        println!("pushed {} {} to {reference}", info.name, info.version);
        println!("digest:            {}", pushed.digest);
        println!("component sha256:  {}", pushed.layer_digest);
        println!("pinned:            {}", reference.at_digest(&pushed.digest));
        Ok(())
    }
}

impl PullOpts {
    pub fn run(self) -> Result<()> {
        let reference = PolicyRef::parse(&self.reference)?;
        let registry = self.registry.client()?;
        let pulled = runtime()?.block_on(registry.pull(&reference))?;
        let source = PolicySource::Bytes {
            origin: format!("{reference} ({})", pulled.digest),
            bytes: pulled.bytes,
        };
        let policy = checker(&self.reference)
            .load_source(&source, String::new())
            .with_context(|| format!("{reference} is not a policy; nothing was written"))?;
        let PolicySource::Bytes { bytes, .. } = &source else {
            unreachable!("built as bytes above")
        };
        // A reader sees the old file or the new one, never half a policy.
        dragon_runtime::write_atomically(&self.out, bytes)
            .with_context(|| format!("cannot write {}", self.out.display()))?;
        eprintln!("wrote {} from {reference}", self.out.display());
        super::load::print_check(&policy, self.json)
    }
}

/// The interfaces a component imports and exports, for the artifact's
/// config (what registry browsers and `wkg` show).
fn component_world(bytes: &[u8]) -> Result<ComponentWorld> {
    let wit_component::DecodedWasm::Component(resolve, world) = wit_component::decode(bytes)?
    else {
        anyhow::bail!("not a component");
    };
    let world = &resolve.worlds[world];
    Ok(ComponentWorld {
        exports: world
            .exports
            .keys()
            .map(|k| resolve.name_world_key(k))
            .collect(),
        imports: world
            .imports
            .keys()
            .map(|k| resolve.name_world_key(k))
            .collect(),
        target: None,
    })
}
