//! The watches that feed the scheduling loop: one per kind, each object
//! translated into a snapshot [`Event`] and every list's end announced
//! ([`Msg::Listed`]), so the loop knows when its snapshot is whole.
//!
//! A kind is watched by naming it once in [`watched!`]: its Rust type, its
//! [`Kind`], the events its objects and their deletions make, and how it
//! is keyed (`namespace/name`, or a cluster-scoped name).

use std::collections::BTreeSet;

use futures::StreamExt;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1 as resource;
use k8s_openapi::api::scheduling::v1beta1::PodGroup as NativePodGroup;
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::mpsc::UnboundedSender;

use crate::key::key_of;
use crate::kube_io::podgroup_resource;
use crate::scheduling::{Kind, Msg};
use crate::snapshot::{Event, GroupApi, PodGroup};

/// A kind of object dragon-scheduler watches.
trait Watched: Sized {
    const KIND: Kind;
    /// The event an added or changed object makes.
    fn event(self) -> Event;
    /// Its key in the snapshot.
    fn key(&self) -> String;
    /// The event its deletion makes.
    fn gone(key: String) -> Event;
}

/// Each watched kind: `Type => Kind, Event::Changed, Event::Gone, key`, the
/// key `namespaced` (`namespace/name`) or `cluster` (the name).
macro_rules! watched {
    ($($ty:ty => $kind:ident, $changed:ident, $gone:ident, $scope:ident;)*) => {$(
        impl Watched for $ty {
            const KIND: Kind = Kind::$kind;
            fn event(self) -> Event {
                Event::$changed(Box::new(self))
            }
            fn key(&self) -> String {
                watched!(@key $scope, self)
            }
            fn gone(key: String) -> Event {
                Event::$gone(key)
            }
        }
    )*};
    (@key namespaced, $obj:expr) => { key_of($obj) };
    (@key cluster, $obj:expr) => { $obj.name_any() };
}

watched! {
    core::Node => Node, Node, NodeGone, cluster;
    core::Pod => Pod, Pod, PodGone, namespaced;
    core::PersistentVolumeClaim => Claim, Claim, ClaimGone, namespaced;
    core::PersistentVolume => Volume, Volume, VolumeGone, cluster;
    StorageClass => StorageClass, StorageClass, StorageClassGone, cluster;
    CSINode => CsiNode, CsiNode, CsiNodeGone, cluster;
    CSIDriver => CsiDriver, CsiDriver, CsiDriverGone, cluster;
    CSIStorageCapacity => StorageCapacity, StorageCapacity, StorageCapacityGone, namespaced;
    VolumeAttachment => VolumeAttachment, VolumeAttachment, VolumeAttachmentGone, cluster;
    PodDisruptionBudget => Budget, Budget, BudgetGone, namespaced;
    resource::ResourceSlice => ResourceSlice, ResourceSlice, ResourceSliceGone, cluster;
    resource::DeviceClass => DeviceClass, DeviceClass, DeviceClassGone, cluster;
    resource::ResourceClaim => ResourceClaim, ResourceClaim, ResourceClaimGone, namespaced;
    resource::DeviceTaintRule => DeviceTaintRule, DeviceTaintRule, DeviceTaintRuleGone, cluster;
}

/// scheduler-plugins' PodGroups (`scheduling.x-k8s.io/v1alpha1`), read
/// through a dynamic API: the CRD may be installed after the scheduler.
impl Watched for DynamicObject {
    const KIND: Kind = Kind::Group;
    fn event(self) -> Event {
        let key = key_of(&self);
        let spec = crate::translate::podgroup_spec(&key, self.data.get("spec"));
        Event::Group(PodGroup {
            key,
            spec,
            annotations: self.metadata.annotations.clone().unwrap_or_default(),
            created_ms: crate::translate::created_ms(&self.metadata),
            api: GroupApi::SchedulerPlugins,
            priority: None,
        })
    }
    fn key(&self) -> String {
        key_of(self)
    }
    fn gone(key: String) -> Event {
        Event::GroupGone(key)
    }
}

/// Kubernetes' own PodGroups (`scheduling.k8s.io/v1beta1`).
impl Watched for NativePodGroup {
    const KIND: Kind = Kind::NativeGroup;
    fn event(self) -> Event {
        let (spec, priority) = crate::translate::native_podgroup_spec(&self);
        Event::Group(PodGroup {
            key: key_of(&self),
            spec: Ok(spec),
            annotations: self.metadata.annotations.clone().unwrap_or_default(),
            created_ms: crate::translate::created_ms(&self.metadata),
            api: GroupApi::Native,
            priority,
        })
    }
    fn key(&self) -> String {
        key_of(self)
    }
    fn gone(key: String) -> Event {
        Event::GroupGone(key)
    }
}

/// Start every watch: the kinds always served, then those an API version or
/// feature gate may leave out (devices, device taint rules, native
/// PodGroups), each only if the API server serves it and this scheduler may
/// list it. Returns the kinds not watched: nothing of them will be listed.
pub async fn spawn_all(client: &Client, tx: &UnboundedSender<Msg>) -> BTreeSet<Kind> {
    let mut unwatched = BTreeSet::new();
    spawn::<core::Node>(Api::all(client.clone()), tx);
    // Finished pods too: they free their node, and count in their
    // PodGroup's status.
    spawn::<core::Pod>(Api::all(client.clone()), tx);
    spawn::<DynamicObject>(Api::all_with(client.clone(), &podgroup_resource()), tx);
    spawn::<core::PersistentVolumeClaim>(Api::all(client.clone()), tx);
    spawn::<StorageClass>(Api::all(client.clone()), tx);
    spawn::<CSINode>(Api::all(client.clone()), tx);
    spawn::<CSIDriver>(Api::all(client.clone()), tx);
    spawn::<CSIStorageCapacity>(Api::all(client.clone()), tx);
    spawn::<VolumeAttachment>(Api::all(client.clone()), tx);
    spawn::<core::PersistentVolume>(Api::all(client.clone()), tx);
    spawn::<PodDisruptionBudget>(Api::all(client.clone()), tx);
    // Devices (`resource.k8s.io/v1`, served by default since 1.34).
    let devices = serves::<resource::ResourceSlice>(
        client,
        "resource.k8s.io/v1",
        "resourceslices",
        "pods claiming devices wait",
    )
    .await;
    if devices {
        spawn::<resource::ResourceSlice>(Api::all(client.clone()), tx);
        spawn::<resource::DeviceClass>(Api::all(client.clone()), tx);
        spawn::<resource::ResourceClaim>(Api::all(client.clone()), tx);
    } else {
        tracing::info!("resource.k8s.io/v1 is not served: pods claiming devices wait, named");
        unwatched.extend([Kind::ResourceSlice, Kind::DeviceClass, Kind::ResourceClaim]);
    }
    // DeviceTaintRules (GA in 1.37, served beside the rest).
    let taint_rules = devices
        && serves::<resource::DeviceTaintRule>(
            client,
            "resource.k8s.io/v1",
            "devicetaintrules",
            "devices are tainted by their slices only",
        )
        .await;
    if taint_rules {
        spawn::<resource::DeviceTaintRule>(Api::all(client.clone()), tx);
    } else {
        unwatched.insert(Kind::DeviceTaintRule);
    }
    let native = serves::<NativePodGroup>(
        client,
        "scheduling.k8s.io/v1beta1",
        "podgroups",
        "gangs come from scheduler-plugins PodGroups only",
    )
    .await;
    if native {
        spawn::<NativePodGroup>(Api::all(client.clone()), tx);
    } else {
        tracing::info!(
            "scheduling.k8s.io/v1beta1 PodGroups are not served (feature gate GenericWorkload); gangs come from scheduler-plugins PodGroups only"
        );
        unwatched.insert(Kind::NativeGroup);
    }
    unwatched
}

/// Forward one kind's watch into `tx`.
fn spawn<K>(api: Api<K>, tx: &UnboundedSender<Msg>)
where
    K: Watched
        + kube::Resource
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let tx = tx.clone();
    let kind = K::KIND;
    tokio::spawn(async move {
        // client-go's reflector backoff (800 ms doubling to 30 s, with
        // jitter, reset after 2 min of health): a restarted API server is
        // not met by every watch of every replica at once.
        let mut stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut listing: Option<BTreeSet<String>> = None;
        while let Some(item) = stream.next().await {
            let msg = match item {
                Ok(watcher::Event::Init) => {
                    listing = Some(BTreeSet::new());
                    continue;
                }
                Ok(watcher::Event::InitApply(obj)) => {
                    if let Some(l) = listing.as_mut() {
                        l.insert(obj.key());
                    }
                    Msg::Event(obj.event())
                }
                Ok(watcher::Event::InitDone) => Msg::Listed {
                    kind,
                    keys: listing.take().unwrap_or_default(),
                },
                Ok(watcher::Event::Apply(obj)) => Msg::Event(obj.event()),
                Ok(watcher::Event::Delete(obj)) => Msg::Event(K::gone(obj.key())),
                Err(e) => {
                    tracing::warn!(?kind, "watch error (retrying after a backoff): {e}");
                    continue;
                }
            };
            if tx.send(msg).is_err() {
                return;
            }
        }
    });
}

/// Whether to watch `K`, a resource (`plural`) of `group_version`: the API
/// server serves it (an API version or feature gate may be off) and this
/// scheduler may list it (an older ClusterRole may not allow it: then it
/// schedules without it, doing `without`, rather than wait forever for a
/// list that is refused).
async fn serves<K>(client: &Client, group_version: &str, plural: &str, without: &str) -> bool
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let served = match client.list_api_group_resources(group_version).await {
        Ok(list) => list.resources.iter().any(|r| r.name == plural),
        Err(_) => false,
    };
    if !served {
        return false;
    }
    let api = Api::<K>::all(client.clone());
    match api.list(&kube::api::ListParams::default().limit(1)).await {
        Err(kube::Error::Api(e)) if e.code == 403 => {
            tracing::warn!(
                "not allowed to list {group_version} {plural} ({}); {without} until the ClusterRole allows it",
                e.message
            );
            false
        }
        // Served and listable, or a passing error the watch will retry.
        _ => true,
    }
}
