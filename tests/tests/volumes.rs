//! Pods whose claims are bound only once they are placed
//! (`WaitForFirstConsumer`) and pods that share a `ReadWriteOncePod` claim,
//! through the framework with the wasm policies: a gang goes where every
//! member's claim finds a volume of its own, and never holds one claim in
//! two pods at once, nor attaches more CSI volumes to a node than its
//! driver allows, counting the pods other schedulers placed.

use dragon_framework::testing;
use dragon_framework::volumes::{
    AccessMode, CsiVolume, PersistentVolume, StorageClass, VolumeBinding, VolumeClaim, VolumeMode,
};
use dragon_framework::{
    Cluster, ClusterOp, Decision, NodeSelector, NodeSelectorTerm, Operator, Pod, RecordingIo,
    Requirement, Resources, Role, Scheduler, SchedulerConfig,
};
use dragon_framework::{NodeName, PodKey};
use dragon_runtime::Hooks;
use dragon_tests::{Ops, bundled, declared_job, engine};

const GI: u64 = 1 << 30;

fn on(node: &str) -> NodeSelector {
    NodeSelector {
        terms: vec![NodeSelectorTerm {
            match_expressions: vec![Requirement {
                key: "kubernetes.io/hostname".into(),
                operator: Operator::In,
                values: vec![node.into()],
            }],
            match_fields: Vec::new(),
        }],
    }
}

/// A local volume of `node`.
fn local(name: &str, node: &str) -> PersistentVolume {
    PersistentVolume {
        name: name.into(),
        class: "local".into(),
        capacity: 100 * GI,
        access_modes: vec![AccessMode::ReadWriteOnce],
        mode: VolumeMode::Filesystem,
        labels: Default::default(),
        node_affinity: Some(on(node)),
        claim: None,
        available: true,
        deleting: false,
        csi: None,
    }
}

fn sched(nodes: &[&str]) -> Scheduler {
    let mut c = Cluster::new();
    for name in nodes {
        let mut node = testing::node(name, 8);
        node.labels
            .insert("kubernetes.io/hostname".into(), name.to_string());
        c.add_node(node).expect("a node");
    }
    c.set_storage_class(StorageClass {
        name: "local".into(),
        provisioner: None,
        allowed_topologies: None,
    });
    Scheduler::new(c, SchedulerConfig::default())
}

/// A gang of `workers` pods of 8 GPUs (a node each), member `i` using
/// `claim(i)`: unbound `WaitForFirstConsumer` claims, or, with `once`,
/// bound `ReadWriteOncePod` claims.
fn add_gang(
    s: &mut Scheduler,
    name: &str,
    workers: u32,
    claim: impl Fn(u32) -> String,
    once: bool,
) {
    s.op(ClusterOp::UpsertJob(declared_job(name, workers)))
        .expect("a job");
    for i in 0..workers {
        let mut pod = Pod::new(
            format!("ns/{name}-{i}"),
            Resources {
                cpu_milli: 1_000,
                memory_mib: 1_024,
                gpus: 8,
            },
        );
        pod.job = Some(name.into());
        pod.role = Role::Worker;
        pod.index = i;
        let mode = match once {
            true => AccessMode::ReadWriteOncePod,
            false => AccessMode::ReadWriteOnce,
        };
        s.op(ClusterOp::SetVolumeClaim(VolumeClaim {
            key: claim(i),
            class: "local".into(),
            request: 10 * GI,
            access_modes: vec![mode],
            mode: VolumeMode::Filesystem,
            selector: None,
            volume: None,
            volume_name: None,
        }))
        .expect("a claim");
        pod.volumes.claims = vec![claim(i)];
        if !once {
            pod.volumes.unbound = vec![claim(i)];
        }
        s.op(ClusterOp::AddPod { pod, node: None }).expect("a pod");
    }
}

fn round(s: &mut Scheduler, now: u64, p: &dyn Hooks) -> (Vec<Decision>, RecordingIo) {
    let mut io = RecordingIo::default();
    let r = s.schedule_round(now, p, &mut io, &mut RecordingIo::default());
    (r.decisions, io)
}

fn unschedulable(d: &[Decision]) -> String {
    d.iter()
        .find_map(|d| match d {
            Decision::Unschedulable { reason, .. } => Some(reason.to_string()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the gang is reported: {d:?}"))
}

#[test]
fn a_gang_with_unbound_local_claims_goes_where_each_member_finds_a_volume_of_its_own() {
    let e = engine();
    let policy = bundled(&e, "dragon", "");
    // Four nodes, volumes on `b` and `d` only.
    let mut s = sched(&["a", "b", "c", "d"]);
    s.op(ClusterOp::SetVolume(local("pv-b", "b")))
        .expect("a volume");
    add_gang(&mut s, "j", 2, |i| format!("ns/data-{i}"), false);
    // One volume for two claims: the whole gang waits, named.
    let (d, io) = round(&mut s, 0, &policy);
    assert!(io.binds.is_empty(), "{d:?}");
    let reason = unschedulable(&d);
    assert!(
        reason.contains("didn't find available persistent volumes to bind"),
        "{reason}"
    );
    // A second volume: each member lands on a volume's node, each claim
    // with a volume of its own.
    s.op(ClusterOp::SetVolume(local("pv-d", "d")))
        .expect("a volume");
    let (d, io) = round(&mut s, 1_000, &policy);
    let mut nodes: Vec<&str> = io.binds.iter().map(|(_, n)| n.as_str()).collect();
    nodes.sort();
    assert_eq!(nodes, ["b", "d"], "{d:?}");
    for (pod, node) in &io.binds {
        let chosen: Vec<_> = s.cluster().volumes().chosen_for(pod).collect();
        assert_eq!(chosen.len(), 1, "{pod}");
        assert_eq!(
            *chosen[0].1,
            VolumeBinding::Volume(format!("pv-{node}")),
            "{pod}"
        );
    }
}

#[test]
fn a_claim_with_no_volume_is_provisioned_on_the_node_its_class_allows() {
    let e = engine();
    let policy = bundled(&e, "dragon", "");
    let mut s = sched(&["a", "b"]);
    s.op(ClusterOp::SetStorageClass(StorageClass {
        name: "local".into(),
        provisioner: Some("csi.example.com".into()),
        allowed_topologies: Some(on("b")),
    }))
    .expect("a class");
    add_gang(&mut s, "j", 1, |i| format!("ns/data-{i}"), false);
    let (d, io) = round(&mut s, 0, &policy);
    assert_eq!(
        io.binds,
        vec![(PodKey::from("ns/j-0"), NodeName::from("b"))],
        "{d:?}"
    );
    let chosen: Vec<_> = s.cluster().volumes().chosen_for("ns/j-0").collect();
    assert_eq!(
        chosen,
        [("ns/data-0", &VolumeBinding::Provision("b".into()))]
    );
}

#[test]
fn a_read_write_once_pod_claim_shared_within_a_gang_keeps_it_pending_and_a_lone_user_runs() {
    let e = engine();
    let policy = bundled(&e, "dragon", "");
    let mut s = sched(&["a", "b"]);
    add_gang(&mut s, "shared", 2, |_| "ns/ckpt".to_string(), true);
    let (d, io) = round(&mut s, 0, &policy);
    assert!(io.binds.is_empty(), "{d:?}");
    let reason = unschedulable(&d);
    assert!(reason.contains("ReadWriteOncePod"), "{reason}");
    // A gang whose members each have a claim of their own runs.
    add_gang(&mut s, "own", 2, |i| format!("ns/ckpt-{i}"), true);
    let (d, io) = round(&mut s, 1_000, &policy);
    assert_eq!(io.binds.len(), 2, "{d:?}");
    assert!(io.binds.iter().all(|(p, _)| p.starts_with("ns/own")));
}

/// A claim bound to CSI volume `handle` of driver `ebs.csi.example.com`,
/// reachable from every node.
fn csi_claim(s: &mut Scheduler, claim: &str, handle: &str) {
    let volume = PersistentVolume {
        name: format!("pv-{handle}"),
        class: String::new(),
        node_affinity: None,
        claim: Some(claim.into()),
        available: false,
        csi: Some(CsiVolume {
            driver: "ebs.csi.example.com".into(),
            handle: handle.into(),
        }),
        ..local("", "a")
    };
    s.op(ClusterOp::SetVolume(volume)).expect("a volume");
    s.op(ClusterOp::SetVolumeClaim(VolumeClaim {
        key: claim.into(),
        class: String::new(),
        request: 10 * GI,
        access_modes: vec![AccessMode::ReadWriteOnce],
        mode: VolumeMode::Filesystem,
        selector: None,
        volume: Some(format!("pv-{handle}")),
        volume_name: None,
    }))
    .expect("a claim");
}

fn gpu_pod(key: &str, claim: &str) -> Pod {
    let mut pod = Pod::new(
        key,
        Resources {
            cpu_milli: 1_000,
            memory_mib: 1_024,
            gpus: 1,
        },
    );
    pod.volumes.claims = vec![claim.into()];
    pod
}

// `TestCSILimits` counts every pod on the node, whoever placed it, and a
// pod of a gang counts the members reserved before it: a node whose
// CSINode allows two volumes of the driver, one attached by a pod placed by
// another scheduler, takes one member of a gang of two, never both.
#[test]
fn a_gang_counts_the_csi_volumes_of_pods_it_did_not_place_and_of_its_own_members() {
    let e = engine();
    let policy = bundled(&e, "dragon", "");
    let mut s = sched(&["a"]);
    s.op(ClusterOp::SetVolumeLimits {
        node: "a".into(),
        limits: [("ebs.csi.example.com".to_string(), 2)].into(),
    })
    .expect("limits");
    for (claim, handle) in [
        ("ns/other", "vol-o"),
        ("ns/ckpt-0", "vol-0"),
        ("ns/ckpt-1", "vol-1"),
    ] {
        csi_claim(&mut s, claim, handle);
    }
    s.op(ClusterOp::AddPod {
        pod: gpu_pod("ns/elsewhere", "ns/other"),
        node: Some("a".into()),
    })
    .expect("a pod bound by another scheduler");
    s.op(ClusterOp::UpsertJob(declared_job("j", 2)))
        .expect("a job");
    for i in 0..2 {
        let mut pod = gpu_pod(&format!("ns/j-{i}"), &format!("ns/ckpt-{i}"));
        pod.job = Some("j".into());
        pod.role = Role::Worker;
        pod.index = i;
        s.op(ClusterOp::AddPod { pod, node: None }).expect("a pod");
    }
    // Three volumes where two fit: the whole gang waits, named.
    let (d, io) = round(&mut s, 0, &policy);
    assert!(io.binds.is_empty(), "{d:?}");
    let reason = unschedulable(&d);
    assert!(reason.contains("exceed max volume count"), "{reason}");
    // The other pod is gone, its volume detached: two fit.
    s.op(ClusterOp::RemovePod("ns/elsewhere".into()))
        .expect("gone");
    let (d, io) = round(&mut s, 1_000, &policy);
    assert_eq!(io.binds.len(), 2, "{d:?}");
}

// VolumeRestrictions counts a pod placed by another scheduler too: its
// `ReadWriteOncePod` claim is in use.
#[test]
fn a_read_write_once_pod_claim_of_a_pod_another_scheduler_placed_is_in_use() {
    let e = engine();
    let policy = bundled(&e, "dragon", "");
    let mut s = sched(&["a", "b"]);
    csi_claim(&mut s, "ns/once", "vol-once");
    s.op(ClusterOp::SetVolumeClaim(VolumeClaim {
        key: "ns/once".into(),
        class: String::new(),
        request: 10 * GI,
        access_modes: vec![AccessMode::ReadWriteOncePod],
        mode: VolumeMode::Filesystem,
        selector: None,
        volume: Some("pv-vol-once".into()),
        volume_name: None,
    }))
    .expect("a claim");
    s.op(ClusterOp::AddPod {
        pod: gpu_pod("ns/elsewhere", "ns/once"),
        node: Some("a".into()),
    })
    .expect("a pod bound by another scheduler");
    s.op(ClusterOp::AddPod {
        pod: gpu_pod("ns/mine", "ns/once"),
        node: None,
    })
    .expect("a pod");
    let (d, io) = round(&mut s, 0, &policy);
    assert!(io.binds.is_empty(), "{d:?}");
    assert!(unschedulable(&d).contains("ReadWriteOncePod"), "{d:?}");
}
