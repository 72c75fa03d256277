//! Cases of `allocatortesting` for what lets devices be given more than
//! once or in parts: admin access, shared devices with consumable
//! capacity, partitionable devices' counters, `distinctAttribute`, and the
//! configuration copied into an allocation.

use super::*;

fn held(inv: &mut Inventory, key: &str, devices: &[&str]) {
    let mut c = claim(key, vec![exactly("req-0", "class-a", 1, &[])]);
    c.allocation = Some(Allocation {
        devices: devices
            .iter()
            .map(|d| {
                AllocatedDevice::new(
                    "req-0",
                    DeviceId {
                        driver: "driver-a".into(),
                        pool: "pool-1".into(),
                        device: (*d).into(),
                    },
                )
            })
            .collect(),
        ..Allocation::default()
    });
    inv.set_claim(c);
}

fn admin(mut r: Request) -> Request {
    r.choices[0].admin_access = true;
    r
}

fn two_devices() -> ResourceSlice {
    local(
        "driver-a",
        "pool-1",
        vec![device("device-1"), device("device-2")],
    )
}

/// The devices each claim gets, with `*` after one given with admin access.
fn given(inv: &Inventory, claims: &[&str]) -> Option<Vec<Vec<String>>> {
    let keys: Vec<String> = claims.iter().map(|c| c.to_string()).collect();
    match inv.fit(&node1(), &keys, &[]).expect("tried") {
        Fit::Yes(allocs, _) => Some(
            allocs
                .iter()
                .map(|(_, a)| {
                    a.devices
                        .iter()
                        .map(|d| {
                            let star = if d.admin_access { "*" } else { "" };
                            format!("{}={}{star}", d.request, d.device.device)
                        })
                        .collect()
                })
                .collect(),
        ),
        Fit::No(_) => None,
    }
}

#[test]
fn admin_access_gives_devices_others_hold_but_never_twice_to_one_claim() {
    // count-devices-some-allocated-admin-access
    let mut inv = inventory(
        vec![two_devices()],
        vec![class("class-a", "driver-a")],
        vec![claim(
            "ns/claim-0",
            vec![admin(exactly("req-0", "class-a", 2, &[]))],
        )],
    );
    held(&mut inv, "ns/held", &["device-1"]);
    assert_eq!(
        given(&inv, &["ns/claim-0"]),
        got(&[&["req-0=device-1*", "req-0=device-2*"]])
    );
    // all-devices-some-allocated-admin-access
    inv.set_claim(claim("ns/claim-1", vec![admin(all("req-0", "class-a"))]));
    assert_eq!(
        given(&inv, &["ns/claim-1"]),
        got(&[&["req-0=device-1*", "req-0=device-2*"]])
    );
    // all-devices-some-allocating-admin-access: the first request's device
    // is this claim's already.
    inv.set_claim(claim(
        "ns/claim-2",
        vec![
            admin(exactly("req-0", "class-a", 1, &[])),
            admin(all("req-1", "class-a")),
        ],
    ));
    assert_eq!(given(&inv, &["ns/claim-2"]), None);
    // separate-claims-share-device-admin-access
    inv.set_claim(claim(
        "ns/claim-3",
        vec![admin(exactly("req-0", "class-a", 1, &[]))],
    ));
    assert_eq!(
        given(&inv, &["ns/claim-0", "ns/claim-3"]),
        got(&[
            &["req-0=device-1*", "req-0=device-2*"],
            &["req-0=device-1*"]
        ])
    );
    // admin-access-claims-device-allocating-for-non-admin-access
    let plain = inventory(
        vec![two_devices()],
        vec![class("class-a", "driver-a")],
        vec![
            claim("ns/claim-0", vec![exactly("req-0", "class-a", 1, &[])]),
            claim(
                "ns/claim-1",
                vec![admin(exactly("req-0", "class-a", 1, &[]))],
            ),
        ],
    );
    assert_eq!(
        given(&plain, &["ns/claim-0", "ns/claim-1"]),
        got(&[&["req-0=device-1"], &["req-0=device-1*"]])
    );
}

#[test]
fn an_allocation_with_admin_access_holds_nothing_from_others() {
    let mut inv = inventory(
        vec![local("driver-a", "pool-1", vec![device("device-1")])],
        vec![class("class-a", "driver-a")],
        vec![claim(
            "ns/claim-0",
            vec![exactly("req-0", "class-a", 1, &[])],
        )],
    );
    let mut monitor = claim(
        "ns/monitor",
        vec![admin(exactly("req-0", "class-a", 1, &[]))],
    );
    let mut d = AllocatedDevice::new(
        "req-0",
        DeviceId {
            driver: "driver-a".into(),
            pool: "pool-1".into(),
            device: "device-1".into(),
        },
    );
    d.admin_access = true;
    monitor.allocation = Some(Allocation {
        devices: vec![d],
        ..Allocation::default()
    });
    inv.set_claim(monitor);
    assert_eq!(given(&inv, &["ns/claim-0"]), got(&[&["req-0=device-1"]]));
}

fn capacity(mut d: Device, amount: u64, policy: Option<RequestPolicy>) -> Device {
    d.shared = true;
    d.capacity
        .insert("capacity0".into(), Quantity(amount * 1000));
    if let Some(p) = policy {
        d.policies.insert("capacity0".into(), p);
    }
    d
}

fn asking(mut r: Request, amount: u64) -> Request {
    r.choices[0]
        .capacity
        .insert("capacity0".into(), Quantity(amount * 1000));
    r
}

/// What each claim's share takes of `capacity0`, by device.
fn shares(inv: &Inventory, claims: &[&str]) -> Option<Vec<(String, u64)>> {
    let keys: Vec<String> = claims.iter().map(|c| c.to_string()).collect();
    match inv.fit(&node1(), &keys, &[]).expect("tried") {
        Fit::Yes(allocs, _) => Some(
            allocs
                .iter()
                .flat_map(|(_, a)| &a.devices)
                .map(|d| {
                    assert!(d.shared, "a share of a shared device");
                    let taken = d.consumed.get("capacity0").map_or(0, |q| q.0 / 1000);
                    (d.device.device.clone(), taken)
                })
                .collect(),
        ),
        Fit::No(_) => None,
    }
}

#[test]
fn shared_devices_are_given_as_shares_of_their_capacity() {
    let one_each = |amount| {
        vec![
            claim(
                "ns/claim-0",
                vec![asking(exactly("req-0", "class-a", 1, &[]), 1)],
            ),
            claim(
                "ns/claim-1",
                vec![asking(exactly("req-0", "class-a", 1, &[]), 1)],
            ),
        ]
        .into_iter()
        .chain(std::iter::once(claim(
            "ns/claim-2",
            vec![asking(exactly("req-0", "class-a", 1, &[]), amount)],
        )))
        .collect::<Vec<_>>()
    };
    // consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request
    let mut inv = inventory(
        vec![local(
            "driver-a",
            "pool-1",
            vec![capacity(device("device-1"), 2, None)],
        )],
        vec![class("class-a", "driver-a")],
        one_each(1),
    );
    assert_eq!(
        shares(&inv, &["ns/claim-0", "ns/claim-1"]),
        Some(vec![("device-1".into(), 1), ("device-1".into(), 1)])
    );
    // A third share does not fit in what is left.
    assert_eq!(
        shares(&inv, &["ns/claim-0", "ns/claim-1", "ns/claim-2"]),
        None
    );
    // Once two shares are written, the device has no room for a third.
    let Ok(Fit::Yes(written, _)) = inv.fit(
        &node1(),
        &["ns/claim-0".to_string(), "ns/claim-1".to_string()],
        &[],
    ) else {
        panic!("both shares fit");
    };
    for (key, a) in written {
        let mut c = inv.claims[&key].claim.clone();
        c.allocation = Some(a);
        inv.set_claim(c);
    }
    assert_eq!(shares(&inv, &["ns/claim-2"]), None);
    // consumable-capacity-multi-allocatable-device-with-missing-capacity-request
    let mut other = claim("ns/claim-3", vec![exactly("req-0", "class-a", 1, &[])]);
    other.requests[0].choices[0]
        .capacity
        .insert("capacity1".into(), Quantity(1000));
    inv.set_claim(other);
    assert_eq!(shares(&inv, &["ns/claim-3"]), None);
}

#[test]
fn a_share_takes_what_its_policy_rounds_the_request_to() {
    // consumable-capacity-multi-allocatable-device-with-range-policy-step
    let range = RequestPolicy {
        default: Some(Quantity(1000)),
        valid: ValidAmounts::Range {
            min: Quantity(1000),
            max: Some(Quantity(4000)),
            step: Some(Quantity(2000)),
        },
    };
    let inv = inventory(
        vec![local(
            "driver-a",
            "pool-1",
            vec![capacity(device("device-1"), 4, Some(range))],
        )],
        vec![class("class-a", "driver-a")],
        vec![
            claim(
                "ns/claim-0",
                vec![asking(exactly("req-0", "class-a", 1, &[]), 2)],
            ),
            claim("ns/claim-1", vec![exactly("req-0", "class-a", 1, &[])]),
        ],
    );
    assert_eq!(
        shares(&inv, &["ns/claim-0"]),
        Some(vec![("device-1".into(), 3)])
    );
    // Without a request, the policy's default.
    assert_eq!(
        shares(&inv, &["ns/claim-0", "ns/claim-1"]),
        Some(vec![("device-1".into(), 3), ("device-1".into(), 1)])
    );
}

fn partition(name: &str, memory: &str) -> Device {
    let mut d = device(name);
    d.consumes.push(CounterUse {
        set: "counter-set-1".into(),
        counters: BTreeMap::from([(
            "memory".to_string(),
            Quantity(crate::quantity::parse(memory, 1000).expect("quantity")),
        )]),
    });
    d
}

fn partitioned(devices: Vec<Device>, memory: &str) -> Vec<ResourceSlice> {
    let mut devices_slice = local("driver-a", "pool-1", devices);
    devices_slice.slice_count = 2;
    let mut counters = local("driver-a", "pool-1", Vec::new());
    counters.slice_count = 2;
    counters.counters.insert(
        "counter-set-1".into(),
        BTreeMap::from([(
            "memory".to_string(),
            Quantity(crate::quantity::parse(memory, 1000).expect("quantity")),
        )]),
    );
    vec![devices_slice, counters]
}

#[test]
fn partitions_are_given_only_while_their_counters_last() {
    // partitionable-devices-single-device
    let inv = inventory(
        partitioned(vec![partition("device-1", "4Gi")], "8Gi"),
        vec![class("class-a", "driver-a")],
        vec![claim(
            "ns/claim-0",
            vec![exactly("req-0", "class-a", 1, &[])],
        )],
    );
    assert_eq!(given(&inv, &["ns/claim-0"]), got(&[&["req-0=device-1"]]));
    // partitionable-devices-multiple-devices: 4Gi + 6Gi exceeds 8Gi, so
    // the second request backtracks to the third partition.
    let inv = inventory(
        partitioned(
            vec![
                partition("device-1", "4Gi"),
                partition("device-2", "6Gi"),
                partition("device-3", "4Gi"),
            ],
            "8Gi",
        ),
        vec![class("class-a", "driver-a")],
        vec![claim(
            "ns/claim-0",
            vec![
                exactly("req-0", "class-a", 1, &[]),
                exactly("req-1", "class-a", 1, &[]),
            ],
        )],
    );
    assert_eq!(
        given(&inv, &["ns/claim-0"]),
        got(&[&["req-0=device-1", "req-1=device-3"]])
    );
    // partitionable-devices-no-capacity-available: device-2's 16Gi is held.
    let mut inv = inventory(
        partitioned(
            vec![partition("device-1", "4Gi"), partition("device-2", "16Gi")],
            "18Gi",
        ),
        vec![class("class-a", "driver-a")],
        vec![claim(
            "ns/claim-0",
            vec![exactly("req-0", "class-a", 1, &[])],
        )],
    );
    held(&mut inv, "ns/held", &["device-2"]);
    assert_eq!(given(&inv, &["ns/claim-0"]), None);
    // Once the holder is gone, its counters come back.
    inv.remove_claim("ns/held");
    assert_eq!(given(&inv, &["ns/claim-0"]), got(&[&["req-0=device-1"]]));
    // partitionable-devices-overallocated-capacity-pool: a pool whose held
    // partitions take more than it has gives no partition at all.
    let mut inv = inventory(
        partitioned(
            vec![partition("device-1", "4Gi"), partition("device-2", "20Gi")],
            "18Gi",
        ),
        vec![class("class-a", "driver-a")],
        vec![claim(
            "ns/claim-0",
            vec![exactly("req-0", "class-a", 1, &[])],
        )],
    );
    held(&mut inv, "ns/held", &["device-2"]);
    assert_eq!(given(&inv, &["ns/claim-0"]), None);
}

#[test]
fn a_partition_taking_from_a_counter_set_not_published_makes_its_pool_unusable() {
    let mut bad = partition("device-1", "4Gi");
    bad.consumes[0].set = "no-such-set".into();
    let inv = inventory(
        partitioned(vec![bad], "8Gi"),
        vec![class("class-a", "driver-a")],
        vec![claim("ns/claim-0", vec![all("req-0", "class-a")])],
    );
    assert_eq!(
        inv.fit(&node1(), &["ns/claim-0".to_string()], &[]),
        Err(DeviceError::PoolUpdating {
            claim: "ns/claim-0".into(),
            request: "req-0".into(),
            pool: "driver-a/pool-1".into(),
        })
    );
}

fn numa(name: &str, n: i64) -> Device {
    with_attr(device(name), "numa", Attribute::Int(n))
}

fn distinct(attribute: &str, requests: &[&str]) -> AttributeConstraint {
    AttributeConstraint {
        requests: requests.iter().map(|s| s.to_string()).collect(),
        attribute: attribute.into(),
        rule: AttributeRule::Distinct,
    }
}

#[test]
fn distinct_attribute_gives_each_device_a_value_of_its_own() {
    let slice = local(
        "driver-a",
        "pool-1",
        vec![
            numa("device-1", 1),
            numa("device-2", 2),
            numa("device-3", 2),
            numa("device-4", 3),
        ],
    );
    let mut three = claim("ns/claim-0", vec![exactly("req-0", "class-a", 3, &[])]);
    three.constraints.push(distinct("numa", &[]));
    let inv = inventory(
        vec![slice.clone()],
        vec![class("class-a", "driver-a")],
        vec![three],
    );
    assert_eq!(
        given(&inv, &["ns/claim-0"]),
        got(&[&["req-0=device-1", "req-0=device-2", "req-0=device-4"]])
    );
    // distinct-constraint-single-request-not-enough-distinct-values
    let mut short = slice;
    short.devices.pop();
    let mut three = claim("ns/claim-0", vec![exactly("req-0", "class-a", 3, &[])]);
    three.constraints.push(distinct("numa", &[]));
    let inv = inventory(vec![short], vec![class("class-a", "driver-a")], vec![three]);
    assert_eq!(given(&inv, &["ns/claim-0"]), None);
    // distinct-constraint-one-multi-allocatable-device-with-distinct-constraint:
    // two shares of one device have one value.
    let mut one = with_attr(device("device-1"), "numa", Attribute::Int(0));
    one = capacity(one, 2, None);
    let mut two = claim(
        "ns/claim-0",
        vec![
            asking(exactly("req-0", "class-a", 1, &[]), 1),
            asking(exactly("req-1", "class-a", 1, &[]), 1),
        ],
    );
    two.constraints.push(distinct("numa", &[]));
    let inv = inventory(
        vec![local("driver-a", "pool-1", vec![one])],
        vec![class("class-a", "driver-a")],
        vec![two],
    );
    assert_eq!(given(&inv, &["ns/claim-0"]), None);
}

fn opaque(driver: &str, value: &str) -> OpaqueConfig {
    OpaqueConfig {
        driver: driver.into(),
        parameters: serde_json::json!({ "value": value }),
    }
}

#[test]
fn an_allocation_carries_its_classes_and_its_claims_configuration() {
    let mut class_a = class("class-a", "driver-a");
    class_a.config.push(opaque("driver-a", "classAttribute-A"));
    let mut class_b = class("class-b", "driver-b");
    class_b.config.push(opaque("driver-b", "classAttribute-B"));
    let mut c = claim(
        "ns/claim-0",
        vec![
            exactly("req-0", "class-a", 1, &[]),
            exactly("req-1", "class-a", 1, &[]),
            exactly("req-2", "class-b", 1, &[]),
        ],
    );
    c.config.push(ClaimConfig {
        requests: vec!["req-0".into(), "req-1".into()],
        opaque: opaque("driver-a", "deviceAttribute"),
    });
    c.config.push(ClaimConfig {
        requests: vec!["req-9".into()],
        opaque: opaque("driver-a", "unused"),
    });
    let inv = inventory(
        vec![
            local(
                "driver-a",
                "pool-1",
                vec![device("device-0"), device("device-1")],
            ),
            local("driver-b", "pool-1", vec![device("device-1")]),
        ],
        vec![class_a, class_b],
        vec![c],
    );
    let Ok(Fit::Yes(allocs, _)) = inv.fit(&node1(), &["ns/claim-0".to_string()], &[]) else {
        panic!("allocated");
    };
    // with-class-device-config-with-multiple-request-and-configs and
    // with-claim-config-for-two-requests.
    let config: Vec<(bool, Vec<String>, String)> = allocs[0]
        .1
        .config
        .iter()
        .map(|c| {
            (
                c.from_class,
                c.requests.clone(),
                c.opaque.parameters["value"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        config,
        vec![
            (true, names(&["req-0", "req-1"]), "classAttribute-A".into()),
            (true, names(&["req-2"]), "classAttribute-B".into()),
            (false, names(&["req-0", "req-1"]), "deviceAttribute".into()),
        ]
    );
    // with-class-device-config: a configuration for every request names none.
    let mut only = class("class-a", "driver-a");
    only.config.push(opaque("driver-a", "classAttribute"));
    let inv = inventory(
        vec![local("driver-a", "pool-1", vec![device("device-1")])],
        vec![only],
        vec![claim(
            "ns/claim-0",
            vec![exactly("req-0", "class-a", 1, &[])],
        )],
    );
    let Ok(Fit::Yes(allocs, _)) = inv.fit(&node1(), &["ns/claim-0".to_string()], &[]) else {
        panic!("allocated");
    };
    assert_eq!(allocs[0].1.config.len(), 1);
    assert!(allocs[0].1.config[0].requests.is_empty());
}

fn binding(name: &str, condition: &str) -> Device {
    let mut d = device(name);
    d.binding = BindingConditions {
        conditions: vec![condition.into()],
        failure_conditions: vec!["BindingFailed".into()],
        to_node: false,
    };
    d
}

#[test]
fn devices_with_binding_conditions_carry_them_and_their_pools_are_tried_last() {
    // binding-conditions-with-and-without
    let inv = inventory(
        vec![local(
            "driver-a",
            "pool-1",
            vec![device("device-1"), binding("device-2", "IsPrepared")],
        )],
        vec![class("class-a", "driver-a")],
        vec![claim(
            "ns/claim-0",
            vec![
                exactly("req-0", "class-a", 1, &[]),
                exactly("req-1", "class-a", 1, &[]),
            ],
        )],
    );
    let Ok(Fit::Yes(allocs, _)) = inv.fit(&node1(), &["ns/claim-0".to_string()], &[]) else {
        panic!("allocated");
    };
    let conditions: Vec<(String, Vec<String>)> = allocs[0]
        .1
        .devices
        .iter()
        .map(|d| (d.device.device.clone(), d.binding.conditions.clone()))
        .collect();
    assert_eq!(
        conditions,
        [
            ("device-1".to_string(), vec![]),
            ("device-2".to_string(), vec!["IsPrepared".to_string()]),
        ]
    );
    // A pool that needs no binding conditions goes first, whatever its
    // name; a device bound to the node takes the allocation to it.
    let mut attached = binding("device-1", "IsAttached");
    attached.binding.to_node = true;
    let inv = inventory(
        vec![
            slice("driver-a", "a-fabric", Reach::All, vec![attached]),
            local("driver-a", "b-local", vec![device("device-1")]),
        ],
        vec![class("class-a", "driver-a")],
        vec![claim(
            "ns/claim-0",
            vec![exactly("req-0", "class-a", 1, &[])],
        )],
    );
    assert_eq!(given(&inv, &["ns/claim-0"]), got(&[&["req-0=device-1"]]));
    let Ok(Fit::Yes(allocs, _)) = inv.fit(&node1(), &["ns/claim-0".to_string()], &[]) else {
        panic!("allocated");
    };
    assert_eq!(allocs[0].1.devices[0].device.pool, "b-local");
    let inv = inventory(
        vec![slice(
            "driver-a",
            "a-fabric",
            Reach::All,
            vec![{
                let mut d = binding("device-1", "IsAttached");
                d.binding.to_node = true;
                d
            }],
        )],
        vec![class("class-a", "driver-a")],
        vec![claim(
            "ns/claim-0",
            vec![exactly("req-0", "class-a", 1, &[])],
        )],
    );
    let Ok(Fit::Yes(allocs, _)) = inv.fit(&node1(), &["ns/claim-0".to_string()], &[]) else {
        panic!("allocated");
    };
    let nodes = allocs[0].1.nodes.as_ref().expect("bound to the node");
    assert!(nodes.matches("node-1", &Default::default()));
    assert!(!nodes.matches("node-2", &Default::default()));
}

#[test]
fn a_request_for_all_devices_leaves_out_those_without_the_capacity_it_asks() {
    // consumable-capacity-multi-allocatable-device-allocation-mode-all-with-missing-capacity-request,
    // beside a device that has it.
    let inv = inventory(
        vec![local(
            "driver-a",
            "pool-1",
            vec![capacity(device("device-1"), 2, None), device("device-2")],
        )],
        vec![class("class-a", "driver-a")],
        vec![
            claim("ns/claim-0", vec![asking(all("req-0", "class-a"), 1)]),
            claim("ns/claim-1", vec![asking(all("req-0", "class-a"), 3)]),
        ],
    );
    assert_eq!(
        shares(&inv, &["ns/claim-0"]),
        Some(vec![("device-1".into(), 1)])
    );
    // None has room for 3: nothing to allocate.
    assert_eq!(shares(&inv, &["ns/claim-1"]), None);
}

#[test]
fn a_pods_extended_claim_once_written_takes_over_the_devices_chosen_for_it() {
    let policy = RequestPolicy {
        default: Some(Quantity(1000)),
        valid: ValidAmounts::Any,
    };
    let mut inv = inventory(
        vec![local(
            "driver-a",
            "pool-1",
            vec![capacity(device("device-1"), 2, Some(policy))],
        )],
        vec![class("class-a", "driver-a")],
        vec![],
    );
    let id = DeviceId {
        driver: "driver-a".into(),
        pool: "pool-1".into(),
        device: "device-1".into(),
    };
    let mut share = AllocatedDevice::new("example.com/x", id.clone());
    share.shared = true;
    share.consumed.insert("capacity0".into(), Quantity(1000));
    let allocation = Allocation {
        devices: vec![share],
        ..Allocation::default()
    };
    inv.choose_extended(
        "ns/p",
        ExtendedChoice {
            allocation: allocation.clone(),
            classes: BTreeMap::from([("example.com/x".into(), "class-a".into())]),
        },
    );
    assert_eq!(inv.shared_use(&id, "capacity0"), 1000);
    // The claim written for it arrives: the share is held once.
    let mut written = claim("ns/p-extended-resources-x1", vec![]);
    written.extended_for = Some("ns/p".into());
    written.allocation = Some(allocation);
    inv.set_claim(written);
    assert_eq!(inv.shared_use(&id, "capacity0"), 1000);
    assert!(inv.extended_for("ns/p").is_none());
    assert_eq!(
        inv.extended_claim_of("ns/p").map(String::as_str),
        Some("ns/p-extended-resources-x1")
    );
    inv.remove_claim("ns/p-extended-resources-x1");
    assert_eq!(inv.shared_use(&id, "capacity0"), 0);
}
