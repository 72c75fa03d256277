//! Pods that claim devices (Dynamic Resource Allocation) through the
//! framework with the wasm policies: a gang's claims are allocated in one
//! attempt or not at all, devices held by a claim are not given twice, and
//! what a released gang had chosen is free again.

use dragon_framework::devices::{Allocation, Claim, Device, DeviceClass, Request, ResourceSlice};
use dragon_framework::testing;
use dragon_framework::{
    Cluster, ClusterOp, Decision, Node, Pod, PodState, RecordingIo, Resources, Role, Scheduler,
    SchedulerConfig, UnitKey,
};
use dragon_framework::{NodeName, PodKey};
use dragon_runtime::Hooks;
use dragon_tests::{Ops, bundled, declared_job, engine};

const DRIVER: &str = "gpu.example.com";

fn gpus(node: &str, n: usize) -> ResourceSlice {
    let devices = (0..n).map(|i| Device::new(format!("gpu-{i}"))).collect();
    ResourceSlice::on_node(DRIVER, node, node, devices)
}

fn sched(nodes: &[(&str, usize)]) -> Scheduler {
    let mut c = Cluster::new();
    for (name, devices) in nodes {
        // No GPU advertised: every GPU comes through a slice.
        c.add_node(testing::node(name, 0)).expect("a node");
        c.set_resource_slice(&format!("{name}-gpus"), gpus(name, *devices));
    }
    c.set_device_class(DeviceClass {
        name: "gpu".into(),
        selectors: vec![format!("device.driver == \"{DRIVER}\"")],
        extended_resource: None,
        ..DeviceClass::default()
    });
    Scheduler::new(c, SchedulerConfig::default())
}

/// A declared gang of `workers` pods, each with a claim of its own for one
/// GPU.
fn add_gang(s: &mut Scheduler, name: &str, workers: u32) {
    add_gang_at(s, name, workers, 0);
}

/// [`add_gang`] of priority `priority`.
fn add_gang_at(s: &mut Scheduler, name: &str, workers: u32, priority: i32) {
    let mut job = declared_job(name, workers);
    job.priority = priority;
    s.op(ClusterOp::UpsertJob(job)).expect("a job");
    for i in 0..workers {
        let claim = format!("ns/{name}-{i}-gpu");
        s.op(ClusterOp::SetClaim(Claim::new(
            claim.clone(),
            vec![Request::exactly("gpu", "gpu", 1, &[])],
        )))
        .expect("a claim");
        let mut pod = Pod::new(
            format!("ns/{name}-{i}"),
            Resources {
                cpu_milli: 1_000,
                memory_mib: 1_024,
                gpus: 0,
            },
        );
        pod.job = Some(name.into());
        pod.role = Role::Worker;
        pod.index = i;
        pod.claims = vec![claim];
        pod.priority = priority;
        s.op(ClusterOp::AddPod { pod, node: None }).expect("a pod");
    }
}

fn round(s: &mut Scheduler, now: u64, p: &dyn Hooks) -> (Vec<Decision>, RecordingIo) {
    let mut io = RecordingIo::default();
    let r = s.schedule_round(now, p, &mut io, &mut RecordingIo::default());
    (r.decisions, io)
}

/// The devices held, as `claim=device`, sorted.
fn held(s: &Scheduler) -> Vec<String> {
    let mut out: Vec<String> = s
        .cluster()
        .pods()
        .filter(|(_, st)| matches!(st, PodState::Bound(_)))
        .flat_map(|(p, _)| {
            s.cluster()
                .devices()
                .chosen_for(&p.key)
                .into_iter()
                .flat_map(|(claim, a)| {
                    a.devices
                        .iter()
                        .map(move |d| format!("{claim}={}", d.device))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_gang_whose_members_claim_devices_is_allocated_whole_or_waits_whole() {
    let e = engine();
    let policy = bundled(&e, "dragon", "");
    // Three GPUs for a gang of four: nothing is bound, nothing held.
    let mut s = sched(&[("a", 2), ("b", 1)]);
    add_gang(&mut s, "j", 4);
    let (d, io) = round(&mut s, 0, &policy);
    assert!(io.binds.is_empty(), "{d:?}");
    assert!(held(&s).is_empty());
    let reason = d
        .iter()
        .find_map(|d| match d {
            Decision::Unschedulable { reason, .. } => Some(reason.to_string()),
            _ => None,
        })
        .expect("the gang is reported");
    assert!(reason.contains("cannot allocate all claims"), "{reason}");
    // A slice adds a GPU: the whole gang binds, each member with a GPU of
    // its own on the node it is bound to.
    s.op(ClusterOp::SetResourceSlice {
        name: "b-gpus".into(),
        slice: gpus("b", 2),
    })
    .expect("a slice");
    let (d, io) = round(&mut s, 1_000, &policy);
    assert_eq!(io.binds.len(), 4, "{d:?}");
    let held = held(&s);
    assert_eq!(held.len(), 4, "{held:?}");
    for (pod, node) in &io.binds {
        let chosen = s.cluster().devices().chosen_for(pod);
        assert_eq!(chosen.len(), 1, "{pod}");
        assert_eq!(chosen[0].1.devices[0].device.pool, *node, "{pod} on {node}");
    }
    let mut devices: Vec<&str> = held
        .iter()
        .map(|h| h.split('=').nth(1).unwrap_or(""))
        .collect();
    devices.dedup();
    assert_eq!(devices.len(), 4, "no device is given twice: {held:?}");
}

#[test]
fn devices_a_claim_holds_are_not_given_again_and_a_removed_pod_gives_back_its_choice() {
    let e = engine();
    let policy = bundled(&e, "dragon", "");
    let mut s = sched(&[("a", 2)]);
    add_gang(&mut s, "first", 2);
    add_gang(&mut s, "second", 1);
    let (d, io) = round(&mut s, 0, &policy);
    assert_eq!(io.binds.len(), 2, "{d:?}");
    assert!(
        io.binds.iter().all(|(p, _)| p.starts_with("ns/first")),
        "{:?}",
        io.binds
    );
    // The first gang's pods go: their unwritten choices are given back.
    for i in 0..2 {
        s.op(ClusterOp::RemovePod(format!("ns/first-{i}").into()))
            .expect("removed");
    }
    let (d, io) = round(&mut s, 1_000, &policy);
    assert_eq!(
        io.binds,
        vec![(PodKey::from("ns/second-0"), NodeName::from("a"))],
        "{d:?}"
    );
}

#[test]
fn a_gpu_request_on_nodes_that_advertise_none_is_served_by_the_gpu_class_and_counted_as_gpus() {
    let e = engine();
    let policy = bundled(&e, "dragon", "");
    let mut s = sched(&[("a", 2), ("b", 4)]);
    // Without a class serving `nvidia.com/gpu`, devices are not GPUs.
    assert_eq!(s.cluster().free(1).gpus, 0);
    s.op(ClusterOp::SetDeviceClass(DeviceClass {
        name: "gpu".into(),
        selectors: vec![format!("device.driver == \"{DRIVER}\"")],
        extended_resource: Some("nvidia.com/gpu".into()),
        ..DeviceClass::default()
    }))
    .expect("a class");
    assert_eq!(
        (s.cluster().free(0).gpus, s.cluster().free(1).gpus),
        (2, 4),
        "the devices are the nodes' GPUs"
    );
    // A gang of four asking `nvidia.com/gpu: 1` each, no claim: DRAGON
    // packs it on the node with four, each member served by a device.
    s.op(ClusterOp::UpsertJob(declared_job("j", 4)))
        .expect("a job");
    for i in 0..4 {
        let mut pod = Pod::new(
            format!("ns/j-{i}"),
            Resources {
                cpu_milli: 1_000,
                memory_mib: 1_024,
                gpus: 1,
            },
        );
        pod.job = Some("j".into());
        pod.role = Role::Worker;
        pod.index = i;
        s.op(ClusterOp::AddPod { pod, node: None }).expect("a pod");
    }
    let (d, io) = round(&mut s, 0, &policy);
    assert_eq!(io.binds.len(), 4, "{d:?}");
    assert!(io.binds.iter().all(|(_, n)| n == "b"), "{:?}", io.binds);
    let mut devices = Vec::new();
    for (pod, _) in &io.binds {
        let choice = s
            .cluster()
            .devices()
            .extended_for(pod)
            .expect("served by devices");
        assert_eq!(choice.classes["nvidia.com/gpu"], "gpu");
        let a = &choice.allocation;
        assert_eq!(a.devices.len(), 1);
        assert_eq!(a.devices[0].request, "nvidia.com/gpu");
        devices.push(a.devices[0].device.to_string());
    }
    devices.sort();
    devices.dedup();
    assert_eq!(devices.len(), 4, "no device given twice");
    assert_eq!(s.cluster().free(1).gpus, 0, "all four held");
    // A fifth asking for three fits nowhere: a has two.
    let pod = Pod::new(
        "ns/three",
        Resources {
            cpu_milli: 1_000,
            memory_mib: 1_024,
            gpus: 3,
        },
    );
    s.op(ClusterOp::AddPod { pod, node: None }).expect("a pod");
    let (d, io) = round(&mut s, 1_000, &policy);
    assert!(io.binds.is_empty(), "{d:?}");
    // Its GPUs gone, the gang's devices are free again.
    for i in 0..4 {
        s.op(ClusterOp::RemovePod(format!("ns/j-{i}").into()))
            .expect("removed");
    }
    assert_eq!(s.cluster().free(1).gpus, 4);
    let (d, io) = round(&mut s, 2_000, &policy);
    assert_eq!(
        io.binds,
        vec![(PodKey::from("ns/three"), NodeName::from("b"))],
        "{d:?}"
    );
}

#[test]
fn a_higher_priority_gang_claiming_devices_preempts_the_gang_whose_allocations_hold_them() {
    let e = engine();
    let policy = bundled(&e, "dragon", "");
    let mut s = sched(&[("a", 2)]);
    add_gang(&mut s, "low", 2);
    let (d, io) = round(&mut s, 0, &policy);
    assert_eq!(io.binds.len(), 2, "{d:?}");
    // The allocations come back from the API server, as a driver's watch
    // brings them.
    for i in 0..2 {
        let pod = format!("ns/low-{i}");
        let chosen: Vec<(String, Allocation)> = s
            .cluster()
            .devices()
            .chosen_for(&pod)
            .into_iter()
            .map(|(c, a)| (c.to_string(), a.clone()))
            .collect();
        for (key, a) in chosen {
            let mut claim = Claim::new(key, vec![Request::exactly("gpu", "gpu", 1, &[])]);
            claim.allocation = Some(a);
            s.op(ClusterOp::SetClaim(claim)).expect("allocated");
        }
    }
    let before = held(&s);
    // A more important gang needs both devices: the low gang's claims
    // count as freed once it is gone, so it is evicted whole.
    add_gang_at(&mut s, "high", 2, 10);
    let (d, _) = round(&mut s, 1_000, &policy);
    let evicted: Vec<_> = d
        .iter()
        .find_map(|d| match d {
            Decision::Preempting { evicted, .. } => Some(evicted.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("a preemption: {d:?}"));
    assert_eq!(evicted, vec![UnitKey::job("low")]);
    // The dry runs gave back everything the victims hold until they go.
    assert_eq!(held(&s), before);
}

#[test]
fn any_extended_resource_a_node_does_not_advertise_is_served_by_the_class_that_names_it() {
    let e = engine();
    let policy = bundled(&e, "dragon", "");
    let mut s = sched(&[("a", 2), ("b", 0)]);
    // b advertises two FPGAs itself (a device plugin's); a advertises none
    // but publishes two devices.
    let mut b = Node::new(
        "b",
        Resources {
            cpu_milli: 32_000,
            memory_mib: 131_072,
            gpus: 0,
        },
    );
    b.extended.insert("example.com/fpga".into(), 2);
    s.op(ClusterOp::UpdateNode(b)).expect("b");
    let fpga = |key: &str, resource: &str, n: u64| {
        let mut pod = Pod::new(
            key,
            Resources {
                cpu_milli: 100,
                memory_mib: 64,
                gpus: 0,
            },
        );
        pod.extended.insert(resource.into(), n);
        pod
    };
    // No class names the resource: only b's own FPGAs serve it.
    s.op(ClusterOp::AddPod {
        pod: fpga("ns/plugin", "example.com/fpga", 2),
        node: None,
    })
    .expect("a pod");
    let (d, io) = round(&mut s, 0, &policy);
    assert_eq!(
        io.binds,
        [(PodKey::from("ns/plugin"), NodeName::from("b"))],
        "{d:?}"
    );
    // A class serving it: a's devices serve a pod asking two; the newest
    // of two classes naming the resource serves it.
    for (name, created_ms) in [("fpga-old", 1), ("fpga", 2)] {
        s.op(ClusterOp::SetDeviceClass(DeviceClass {
            name: name.into(),
            selectors: vec![format!("device.driver == \"{DRIVER}\"")],
            extended_resource: Some("example.com/fpga".into()),
            created_ms,
            ..DeviceClass::default()
        }))
        .expect("a class");
    }
    s.op(ClusterOp::AddPod {
        pod: fpga("ns/dra", "example.com/fpga", 2),
        node: None,
    })
    .expect("a pod");
    let (d, io) = round(&mut s, 1_000, &policy);
    assert_eq!(
        io.binds,
        [(PodKey::from("ns/dra"), NodeName::from("a"))],
        "{d:?}"
    );
    let choice = s
        .cluster()
        .devices()
        .extended_for("ns/dra")
        .expect("served");
    assert_eq!(choice.classes["example.com/fpga"], "fpga");
    assert_eq!(choice.allocation.devices.len(), 2);
    // Every class serves `deviceclass.resource.kubernetes.io/CLASS`; a's
    // devices are all held now, so a pod asking one through the class's
    // own name waits, named.
    s.op(ClusterOp::AddPod {
        pod: fpga("ns/implicit", "deviceclass.resource.kubernetes.io/gpu", 1),
        node: None,
    })
    .expect("a pod");
    let (d, io) = round(&mut s, 2_000, &policy);
    assert!(io.binds.is_empty(), "{d:?}");
    let why = format!("{d:?}");
    assert!(why.contains("cannot allocate all claims"), "{why}");
    s.op(ClusterOp::RemovePod("ns/dra".into()))
        .expect("removed");
    let (d, io) = round(&mut s, 3_000, &policy);
    assert_eq!(
        io.binds,
        [(PodKey::from("ns/implicit"), NodeName::from("a"))],
        "{d:?}"
    );
    let choice = s
        .cluster()
        .devices()
        .extended_for("ns/implicit")
        .expect("served");
    assert_eq!(
        choice.classes["deviceclass.resource.kubernetes.io/gpu"],
        "gpu"
    );
}
