//! The harness shared by the end-to-end tests: one real control plane per
//! test process (tests/controlplane/up.sh), scenarios isolated by namespace,
//! node label and scheduler name, and `dragon-scheduler` processes.
#![allow(dead_code)]

mod control_plane;
pub mod kueue;
mod monitor;
mod process;
pub mod proxy;
mod scenario;
mod wait;

pub use control_plane::*;
pub use monitor::*;
pub use process::*;
pub use scenario::*;
pub use wait::*;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1 as resource;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
