//! Volumes as a CSI driver serves them, on a real control plane: the test
//! publishes what a driver would (its CSIDriver, its storage capacity) and
//! then plays the provisioner.

mod common;

use common::*;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::storage::v1 as storage;
use kube::api::Api;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_is_provisioned_on_the_node_where_its_driver_publishes_room_and_its_pod_follows() {
    let _g = serial();
    let s = Scenario::new("capacity").await;
    s.node("a", 0).await;
    s.node("b", 0).await;
    let driver = format!("{}.csi.example.com", s.name);
    let drivers: Api<storage::CSIDriver> = Api::all(s.client.clone());
    s.create(
        &drivers,
        json!({"metadata": {"name": driver, "labels": {"dragon-e2e": s.name}},
            "spec": {"storageCapacity": true, "attachRequired": false}}),
    )
    .await;
    let classes: Api<storage::StorageClass> = Api::all(s.client.clone());
    let class = format!("{}-fast", s.name);
    s.create(
        &classes,
        json!({"metadata": {"name": class, "labels": {"dragon-e2e": s.name}},
            "provisioner": driver, "volumeBindingMode": "WaitForFirstConsumer"}),
    )
    .await;
    // Room only on b, and too little on a.
    let capacities: Api<storage::CSIStorageCapacity> = Api::namespaced(s.client.clone(), &s.name);
    for (name, node, size) in [("on-a", "a", "512Mi"), ("on-b", "b", "10Gi")] {
        s.create(
            &capacities,
            json!({"metadata": {"name": name, "namespace": s.name},
                "storageClassName": class,
                "nodeTopology": {"matchLabels": {"kubernetes.io/hostname": format!("{}-{node}", s.name)}},
                "capacity": size}),
        )
        .await;
    }
    s.claim_in("data", &class, "ReadWriteOnce", None).await;
    let sched = Scheduler::start(&s, "dragon", "");
    s.pod_with(
        "p",
        None,
        0,
        json!({"spec": {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}),
    )
    .await;
    let claims: Api<core::PersistentVolumeClaim> = Api::namespaced(s.client.clone(), &s.name);
    let selected = || async {
        claims
            .get("data")
            .await
            .ok()
            .and_then(|c| c.metadata.annotations)
            .and_then(|a| a.get("volume.kubernetes.io/selected-node").cloned())
    };
    let chosen = until_within(90, || async { selected().await.is_some() }).await;
    assert!(chosen, "{:?}\n{}", s.events_for("p").await, sched.log());
    assert_eq!(selected().await, Some(format!("{}-b", s.name)));
    // The provisioner makes the volume on b; the PV controller binds it and
    // the pod goes where its volume is.
    let uid = claims.get("data").await.unwrap().metadata.uid;
    let volumes: Api<core::PersistentVolume> = Api::all(s.client.clone());
    s.create(
        &volumes,
        json!({"metadata": {"name": format!("{}-data", s.name), "labels": {"dragon-e2e": s.name}},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "storageClassName": class,
                "claimRef": {"namespace": s.name, "name": "data", "uid": uid},
                "csi": {"driver": driver, "volumeHandle": "vol-data"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [format!("{}-b", s.name)]}]}]}}}}),
    )
    .await;
    let placed = until_within(120, || async { bound(&s.placement("p").await) == 1 }).await;
    assert!(placed, "{:?}\n{}", s.events_for("p").await, sched.log());
    assert_eq!(
        s.placement("p").await["p"].as_deref(),
        Some(format!("{}-b", s.name).as_str())
    );
    // A second claim finds room nowhere once b's capacity says so.
    capacities
        .delete("on-b", &Default::default())
        .await
        .expect("deleted");
    s.claim_in("more", &class, "ReadWriteOnce", None).await;
    s.pod_with(
        "q",
        None,
        0,
        json!({"spec": {"volumes": [{"name": "more", "persistentVolumeClaim": {"claimName": "more"}}]}}),
    )
    .await;
    s.until_explained(90, "q", "did not have enough free storage")
        .await;
    s.cleanup().await;
}

/// NodeVolumeLimits as `TestCSILimits` has it: every pod on the node
/// counts, whoever placed it, and the members of a gang count together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_never_attaches_more_csi_volumes_to_a_node_than_its_csinode_allows() {
    let _g = serial();
    let s = Scenario::new("csi-limits").await;
    s.node("a", 8).await;
    let driver = format!("{}.csi.example.com", s.name);
    let labels = json!({"dragon-e2e": s.name});
    let drivers: Api<storage::CSIDriver> = Api::all(s.client.clone());
    s.create(
        &drivers,
        json!({"metadata": {"name": driver, "labels": labels},
            "spec": {"attachRequired": false}}),
    )
    .await;
    // Two volumes of the driver per node.
    let csi_nodes: Api<storage::CSINode> = Api::all(s.client.clone());
    s.create(
        &csi_nodes,
        json!({"metadata": {"name": format!("{}-a", s.name), "labels": labels},
            "spec": {"drivers": [{"name": driver, "nodeID": "a", "allocatable": {"count": 2}}]}}),
    )
    .await;
    // Three CSI volumes, each pre-bound to a claim of its own.
    let volumes: Api<core::PersistentVolume> = Api::all(s.client.clone());
    for claim in ["other", "ckpt-0", "ckpt-1"] {
        let pv = format!("{}-{claim}", s.name);
        s.create(
            &volumes,
            json!({"metadata": {"name": pv, "labels": labels},
                "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "", "claimRef": {"namespace": s.name, "name": claim},
                    "csi": {"driver": driver, "volumeHandle": claim}}}),
        )
        .await;
        s.claim_in(claim, "", "ReadWriteOnce", Some(&pv)).await;
        s.until_claim_bound(claim).await;
    }
    let uses = |claim: &str| json!({"spec": {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}});
    // One attached by a pod another scheduler placed.
    let mut other = s.pod_manifest("other", "default-scheduler", None, 0, None, Some("a"), &[]);
    merge(&mut other, &uses("other"));
    s.submit(other).await;
    let sched = Scheduler::start(&s, "dragon", "");
    s.podgroup("j", 2, json!({})).await;
    for i in 0..2 {
        let name = format!("j-{i}");
        s.pod_with(
            &name,
            Some(("j", "worker", i)),
            1,
            uses(&format!("ckpt-{i}")),
        )
        .await;
    }
    // Three volumes where two fit: the gang waits whole, named.
    s.until_explained(90, "j-0", "exceed max volume count")
        .await;
    assert_eq!(bound(&s.placement("j-").await), 0, "{}", sched.log());
    // The other pod goes and its volume with it: the gang runs.
    let pods: Api<core::Pod> = Api::namespaced(s.client.clone(), &s.name);
    pods.delete("other", &kube::api::DeleteParams::default().grace_period(0))
        .await
        .expect("deleted");
    let placed = until_within(120, || async { bound(&s.placement("j-").await) == 2 }).await;
    assert!(placed, "{:?}\n{}", s.events_for("j-0").await, sched.log());
    s.cleanup().await;
}
