//! Cases of kube-scheduler's `TestFindPodVolumesWithoutProvisioning` and
//! `TestFindPodVolumesWithProvisioning` (volumebinding/binder_test.go),
//! with their volumes, claims and classes.

use super::*;
use crate::model::Resources;
use crate::selector::{NodeSelectorTerm, Operator, Requirement};

const G: u64 = 1_000_000_000;
const GI: u64 = 1 << 30;

fn on(node: &str) -> NodeSelector {
    NodeSelector {
        terms: vec![NodeSelectorTerm {
            match_expressions: vec![Requirement {
                key: "nodeKey".into(),
                operator: Operator::In,
                values: vec![node.into()],
            }],
            match_fields: Vec::new(),
        }],
    }
}

fn node(name: &str) -> Node {
    let mut n = Node::new(name, Resources::default());
    n.labels.insert("nodeKey".into(), name.into());
    n
}

fn pv(name: &str, node: &str, capacity: u64, claim: Option<&str>) -> PersistentVolume {
    PersistentVolume {
        name: name.into(),
        class: "waitClass".into(),
        capacity,
        access_modes: vec![AccessMode::ReadWriteOnce],
        mode: VolumeMode::Filesystem,
        labels: Labels::new(),
        node_affinity: Some(on(node)),
        claim: claim.map(|c| format!("testns/{c}")),
        available: claim.is_none(),
        deleting: false,
        csi: None,
    }
}

fn pvc(name: &str, request: u64, class: &str) -> VolumeClaim {
    VolumeClaim {
        key: format!("testns/{name}"),
        class: class.into(),
        request,
        access_modes: vec![AccessMode::ReadWriteOnce],
        mode: VolumeMode::Filesystem,
        selector: None,
        volume: None,
        volume_name: None,
    }
}

/// kube's fixtures: three classes, two nodes' volumes, four claims.
fn inventory(volumes: &[PersistentVolume]) -> Volumes {
    let mut v = Volumes::default();
    for (name, provisioner, topology) in [
        ("waitClass", None, None),
        ("waitClassWithProvisioner", Some("csi.example.com"), None),
        (
            "topoMismatchClass",
            Some("csi.example.com"),
            Some(on("node2")),
        ),
    ] {
        v.set_class(StorageClass {
            name: name.into(),
            provisioner: provisioner.map(str::to_string),
            allowed_topologies: topology,
        });
    }
    for volume in volumes {
        v.set_volume(volume.clone());
    }
    v.set_claim(pvc("unbound-pvc", G, "waitClass"));
    v.set_claim(pvc("unbound-pvc2", 5 * G, "waitClass"));
    v.set_claim(pvc("provisioned-pvc", GI, "waitClassWithProvisioner"));
    v.set_claim(pvc("no-provisioner-pvc", GI, "waitClass"));
    v.set_claim(pvc("topo-mismatch-pvc", GI, "topoMismatchClass"));
    v
}

/// A pod's volumes: claims `names`.
fn uses(names: &[&str]) -> PodVolumes {
    PodVolumes {
        claims: keys(names),
        ..PodVolumes::default()
    }
}

fn keys(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| format!("testns/{n}")).collect()
}

fn bound(pairs: &[(&str, &str)]) -> Vec<(String, VolumeBinding)> {
    pairs
        .iter()
        .map(|(c, v)| (format!("testns/{c}"), VolumeBinding::Volume(v.to_string())))
        .collect()
}

fn node1a() -> PersistentVolume {
    pv("pv-node1a", "node1", 5 * G, None)
}
fn node1b() -> PersistentVolume {
    pv("pv-node1b", "node1", 10 * G, None)
}
fn node2() -> PersistentVolume {
    pv("pv-node2", "node2", G, None)
}

fn fit(volumes: &Volumes, claims: &[&str]) -> Result<Vec<(String, VolumeBinding)>, &'static str> {
    volumes.fit(&node("node1"), &keys(claims)).unwrap()
}

#[test]
fn a_claim_takes_the_smallest_matching_volume_its_node_reaches() {
    // unbound-pvc,pv-same-node
    let v = inventory(&[node2(), node1a(), node1b()]);
    assert_eq!(
        fit(&v, &["unbound-pvc"]),
        Ok(bound(&[("unbound-pvc", "pv-node1a")]))
    );
    // unbound-pvc,pv-different-node
    let v = inventory(&[node2()]);
    assert_eq!(fit(&v, &["unbound-pvc"]), Err(NO_VOLUME));
}

#[test]
fn two_claims_take_two_volumes_smallest_request_first() {
    // two-unbound-pvcs and two-unbound-pvcs,order-by-size
    let v = inventory(&[node1a(), node1b()]);
    let both = bound(&[("unbound-pvc", "pv-node1a"), ("unbound-pvc2", "pv-node1b")]);
    assert_eq!(fit(&v, &["unbound-pvc", "unbound-pvc2"]), Ok(both.clone()));
    assert_eq!(fit(&v, &["unbound-pvc2", "unbound-pvc"]), Ok(both));
    // two-unbound-pvcs,partial-match: the second has no volume left and
    // its class provisions none.
    let v = inventory(&[node1a()]);
    assert_eq!(fit(&v, &["unbound-pvc", "unbound-pvc2"]), Err(NO_VOLUME));
}

#[test]
fn a_volume_pre_bound_to_the_claim_is_taken_even_when_larger() {
    let mut v = inventory(&[
        node1a(),
        pv("pv-node1b", "node1", 10 * G, Some("unbound-pvc")),
    ]);
    assert_eq!(
        fit(&v, &["unbound-pvc"]),
        Ok(bound(&[("unbound-pvc", "pv-node1b")]))
    );
    // Pre-bound to a volume on another node: no other volume will do.
    v.set_volume(pv("pv-node1b", "node2", 10 * G, Some("unbound-pvc")));
    v.set_volume(node1a());
    assert_eq!(fit(&v, &["unbound-pvc"]), Err(NO_VOLUME));
}

#[test]
fn a_volume_bound_to_another_claim_or_of_another_mode_or_size_is_not_taken() {
    let mut v = inventory(&[pv("pv-node1a", "node1", 5 * G, Some("bound-pvc"))]);
    assert_eq!(fit(&v, &["unbound-pvc"]), Err(NO_VOLUME));
    let mut block = node1a();
    block.mode = VolumeMode::Block;
    v.set_volume(block);
    assert_eq!(fit(&v, &["unbound-pvc"]), Err(NO_VOLUME));
    v.set_volume(pv("pv-node1a", "node1", G / 2, None));
    assert_eq!(fit(&v, &["unbound-pvc"]), Err(NO_VOLUME));
    let mut many = node1a();
    many.access_modes = vec![AccessMode::ReadOnlyMany];
    v.set_volume(many);
    assert_eq!(fit(&v, &["unbound-pvc"]), Err(NO_VOLUME));
}

#[test]
fn a_claim_with_no_volume_is_provisioned_where_its_class_may_provision() {
    // one-provisioned
    let v = inventory(&[]);
    assert_eq!(
        fit(&v, &["provisioned-pvc"]),
        Ok(vec![(
            "testns/provisioned-pvc".into(),
            VolumeBinding::Provision("node1".into())
        )])
    );
    // two-unbound-pvcs,one-matched,one-provisioned
    let v = inventory(&[node1a()]);
    let both = fit(&v, &["unbound-pvc", "provisioned-pvc"]).unwrap();
    assert_eq!(both.len(), 2);
    // invalid-provisioner and volume-topology-unsatisfied (no volumes)
    let v = inventory(&[]);
    assert_eq!(fit(&v, &["no-provisioner-pvc"]), Err(NO_VOLUME));
    assert_eq!(fit(&v, &["topo-mismatch-pvc"]), Err(NO_VOLUME));
    assert!(
        v.fit(&node("node2"), &keys(&["topo-mismatch-pvc"]))
            .unwrap()
            .is_ok()
    );
}

#[test]
fn a_missing_claim_or_class_is_an_error_naming_it() {
    // pvc-not-found
    let mut v = inventory(&[]);
    assert_eq!(
        v.fit(&node("node1"), &keys(&["nowhere"])),
        Err(VolumeError::NoClaim("testns/nowhere".into()))
    );
    v.set_claim(pvc("orphan", G, "gone"));
    assert!(matches!(
        v.fit(&node("node1"), &keys(&["orphan"])),
        Err(VolumeError::NoClass { .. })
    ));
}

#[test]
fn a_volume_one_pod_chose_is_not_offered_to_another_and_comes_back_when_given_up() {
    let mut v = inventory(&[node1a()]);
    v.set_claim(pvc("other", G, "waitClass"));
    let chosen = fit(&v, &["unbound-pvc"]).unwrap();
    v.choose("testns/p0", chosen);
    assert_eq!(fit(&v, &["other"]), Err(NO_VOLUME));
    // The claim itself, shared by a second pod: reachable from node1 only.
    assert_eq!(fit(&v, &["unbound-pvc"]), Ok(Vec::new()));
    assert_eq!(
        v.fit(&node("node2"), &keys(&["unbound-pvc"])).unwrap(),
        Err(NODE_CONFLICT)
    );
    assert_eq!(v.chosen_for("testns/p0").count(), 1);
    v.unchoose("testns/p0");
    assert_eq!(fit(&v, &["other"]), Ok(bound(&[("other", "pv-node1a")])));
}

#[test]
fn a_read_write_once_pod_claim_is_used_by_one_placed_pod_at_a_time() {
    let mut v = inventory(&[]);
    let mut once = pvc("once", G, "waitClass");
    once.access_modes = vec![AccessMode::ReadWriteOncePod];
    v.set_claim(once);
    let claims = keys(&["once", "unbound-pvc"]);
    assert!(!v.in_use_once("a", &claims));
    v.use_claims("a", 0, &claims, true);
    assert!(!v.in_use_once("a", &claims), "its own use is no conflict");
    assert!(v.in_use_once("b", &claims));
    assert!(
        !v.in_use_once("b", &keys(&["unbound-pvc"])),
        "a ReadWriteOnce claim is shared"
    );
    v.use_claims("a", 0, &claims, false);
    assert!(!v.in_use_once("b", &claims));
}

/// A bound claim `name` on CSI volume `handle` of driver `ebs`.
fn on_csi(v: &mut Volumes, name: &str, handle: &str) {
    let mut volume = pv(&format!("pv-{handle}"), "node1", G, Some(name));
    volume.csi = Some(CsiVolume {
        driver: "ebs".into(),
        handle: handle.into(),
    });
    v.set_volume(volume);
    let mut claim = pvc(name, G, "waitClass");
    claim.volume = Some(format!("pv-{handle}"));
    v.set_claim(claim);
}

// Cases of `TestCSILimits` (nodevolumelimits/csi_test.go): volumes counted
// per driver against the CSINode's allocatable count, one volume used by
// several pods counted once.
#[test]
fn a_node_attaches_no_more_csi_volumes_than_its_driver_allows_and_counts_a_shared_one_once() {
    let mut v = inventory(&[]);
    for (claim, handle) in [("one", "vol-1"), ("two", "vol-2"), ("three", "vol-3")] {
        on_csi(&mut v, claim, handle);
    }
    // No CSINode limit: anything goes.
    assert!(v.within_limits("node1", 0, &uses(&["one", "two", "three"])));
    v.set_limits("node1", [("ebs".to_string(), 2)].into());
    assert!(v.within_limits("node1", 0, &uses(&["one", "two"])));
    // "doesn't when node volume limit <= pods CSI volume"
    assert!(!v.within_limits("node1", 0, &uses(&["one", "two", "three"])));
    // Two attached by a placed pod: a third is one too many, a shared one
    // is not new.
    v.use_claims("testns/placed", 0, &keys(&["one", "two"]), true);
    assert!(!v.within_limits("node1", 0, &uses(&["three"])));
    assert!(v.within_limits("node1", 0, &uses(&["two"])));
    // Another node, another count; another driver, no limit.
    assert!(v.within_limits("node1", 1, &uses(&["three"])));
    v.use_claims("testns/placed", 0, &keys(&["one", "two"]), false);
    assert!(v.within_limits("node1", 0, &uses(&["three"])));
    // A claim pre-bound to a volume (`spec.volumeName`) and not bound yet
    // counts for that volume already, as kube reads `spec.volumeName`.
    let mut prebound = pvc("prebound", G, "");
    prebound.volume_name = Some("pv-vol-1".into());
    v.set_claim(prebound);
    v.use_claims("testns/placed", 0, &keys(&["two"]), true);
    assert!(!v.within_limits("node1", 0, &uses(&["prebound", "three"])));
    assert!(v.within_limits("node1", 0, &uses(&["prebound", "two"])));
    v.use_claims("testns/placed", 0, &keys(&["two"]), false);
    // "should count pending PVCs if the feature is enabled": an unbound
    // claim counts for its class's provisioner.
    v.set_limits("node1", [("csi.example.com".to_string(), 0)].into());
    assert!(!v.within_limits("node1", 0, &uses(&["provisioned-pvc"])));
    assert!(v.within_limits("node1", 0, &uses(&["one"])));
}

fn capacity(name: &str, class: &str, node: Option<&str>, limit: Option<u64>) -> StorageCapacity {
    let mut nodes = LabelSelector::default();
    if let Some(n) = node {
        nodes.match_labels.insert("nodeKey".into(), n.into());
    }
    StorageCapacity {
        key: format!("testns/{name}"),
        class: class.into(),
        nodes: Some(nodes),
        limit,
    }
}

// Cases of `TestCapacity` (volumebinding/binder_test.go): a claim to be
// provisioned by a driver that publishes its capacity needs a capacity
// object of its class, reaching the node, with room for it.
#[test]
fn a_claim_is_provisioned_only_where_its_driver_says_there_is_room() {
    let provision = || {
        Ok(vec![(
            "testns/provisioned-pvc".to_string(),
            VolumeBinding::Provision("node1".into()),
        )])
    };
    let mut v = inventory(&[]);
    // A driver that does not publish its capacity: not checked.
    assert_eq!(fit(&v, &["provisioned-pvc"]), provision());
    v.set_capacity_driver("csi.example.com", true);
    // no-storage
    assert_eq!(fit(&v, &["provisioned-pvc"]), Err(NOT_ENOUGH_SPACE));
    // wrong-node, wrong-storage-class, too small, maximum volume size too small
    for c in [
        capacity("net", "waitClassWithProvisioner", Some("node2"), Some(GI)),
        capacity("net", "waitClass", Some("node1"), Some(GI)),
        capacity(
            "net",
            "waitClassWithProvisioner",
            Some("node1"),
            Some(1 << 20),
        ),
        capacity("net", "waitClassWithProvisioner", Some("node1"), None),
    ] {
        v.set_capacity(c);
        assert_eq!(fit(&v, &["provisioned-pvc"]), Err(NOT_ENOUGH_SPACE));
    }
    // network-attached (every node), local-storage (this node)
    v.set_capacity(capacity("net", "waitClassWithProvisioner", None, Some(GI)));
    assert_eq!(fit(&v, &["provisioned-pvc"]), provision());
    v.remove_capacity("testns/net");
    v.set_capacity(capacity(
        "local",
        "waitClassWithProvisioner",
        Some("node1"),
        Some(GI),
    ));
    assert_eq!(fit(&v, &["provisioned-pvc"]), provision());
    // The driver no longer publishes: not checked again.
    v.remove_capacity("testns/local");
    v.set_capacity_driver("csi.example.com", false);
    assert_eq!(fit(&v, &["provisioned-pvc"]), provision());
}

// `TestCSILimits`' "should count VolumeAttachments towards volume limit
// when no pods exist": a volume still attached to the node counts, once.
#[test]
fn a_volume_attachment_counts_against_its_nodes_limit_until_it_is_gone() {
    let mut v = inventory(&[]);
    for (claim, handle) in [("one", "vol-1"), ("two", "vol-2")] {
        on_csi(&mut v, claim, handle);
    }
    v.set_limits("node1", [("ebs".to_string(), 1)].into());
    assert!(v.within_limits("node1", 0, &uses(&["one"])));
    v.set_attachment(VolumeAttachment {
        name: "va-2".into(),
        node: "node1".into(),
        attacher: "ebs".into(),
        volume: "pv-vol-2".into(),
    });
    assert!(!v.within_limits("node1", 0, &uses(&["one"])));
    // The attached volume itself is not attached again.
    assert!(v.within_limits("node1", 0, &uses(&["two"])));
    // On another node it does not count.
    v.set_limits("node2", [("ebs".to_string(), 1)].into());
    assert!(v.within_limits("node2", 1, &uses(&["one"])));
    v.remove_attachment("va-2");
    assert!(v.within_limits("node1", 0, &uses(&["one"])));
}

// `TestCSILimits`' in-tree inline volumes that migrate ("should count
// in-tree inline volumes if migration is enabled"): a pod's inline volume
// counts for its CSI driver, on its node while the pod is placed.
#[test]
fn an_in_tree_inline_volume_counts_for_the_csi_driver_that_serves_it() {
    let mut v = inventory(&[]);
    on_csi(&mut v, "one", "vol-1");
    v.set_limits("node1", [("ebs".to_string(), 1)].into());
    let inline = |handle: &str| PodVolumes {
        inline: vec![CsiVolume {
            driver: "ebs".into(),
            handle: handle.into(),
        }],
        ..PodVolumes::default()
    };
    assert!(v.within_limits("node1", 0, &inline("vol-9")));
    v.use_volumes("testns/placed", 0, &inline("vol-9"), true);
    assert!(!v.within_limits("node1", 0, &uses(&["one"])));
    // The same disk is not attached twice.
    assert!(v.within_limits("node1", 0, &inline("vol-9")));
    v.use_volumes("testns/placed", 0, &inline("vol-9"), false);
    assert!(v.within_limits("node1", 0, &uses(&["one"])));
    // An unbound claim of an in-tree provisioner counts for its CSI driver.
    v.set_class(StorageClass {
        name: "gp2".into(),
        provisioner: Some("kubernetes.io/aws-ebs".into()),
        allowed_topologies: None,
    });
    v.set_claim(pvc("in-tree", GI, "gp2"));
    v.set_limits("node1", [("ebs.csi.aws.com".to_string(), 0)].into());
    assert!(!v.within_limits("node1", 0, &uses(&["in-tree"])));
}

// Cases of `TestGCEDiskConflicts`, `TestAWSDiskConflicts`,
// `TestRBDDiskConflicts` and `TestISCSIDiskConflicts`
// (volumerestrictions): one disk on a node at a time, unless every pod
// mounts it read only (never for an EBS volume).
#[test]
fn an_inline_disk_is_mounted_on_a_node_by_one_pod_unless_all_mount_it_read_only() {
    let disk = |key: &str, read_only: bool| PodVolumes {
        disks: vec![InlineDisk {
            keys: vec![key.into()],
            read_only,
        }],
        ..PodVolumes::default()
    };
    let mut v = inventory(&[]);
    assert!(!v.disk_conflict(0, &disk("gce-pd:foo", false).disks));
    v.use_volumes("testns/a", 0, &disk("gce-pd:foo", false), true);
    assert!(v.disk_conflict(0, &disk("gce-pd:foo", false).disks));
    assert!(v.disk_conflict(0, &disk("gce-pd:foo", true).disks));
    assert!(!v.disk_conflict(0, &disk("gce-pd:bar", false).disks));
    assert!(!v.disk_conflict(1, &disk("gce-pd:foo", false).disks));
    v.use_volumes("testns/a", 0, &disk("gce-pd:foo", false), false);
    // Read only beside read only is fine; read-write beside it is not.
    v.use_volumes("testns/b", 0, &disk("gce-pd:foo", true), true);
    assert!(!v.disk_conflict(0, &disk("gce-pd:foo", true).disks));
    assert!(v.disk_conflict(0, &disk("gce-pd:foo", false).disks));
    // An RBD image is one when any monitor is shared.
    let rbd = |monitors: &[&str]| PodVolumes {
        disks: vec![InlineDisk {
            keys: monitors
                .iter()
                .map(|m| format!("rbd:{m}/rbd/img"))
                .collect(),
            read_only: false,
        }],
        ..PodVolumes::default()
    };
    v.use_volumes("testns/c", 0, &rbd(&["a", "b"]), true);
    assert!(v.disk_conflict(0, &rbd(&["b", "c"]).disks));
    assert!(!v.disk_conflict(0, &rbd(&["c", "d"]).disks));
}
