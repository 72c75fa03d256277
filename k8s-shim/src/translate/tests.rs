use super::*;
use dragon_framework::{HostPort, Operator, Resources};

fn pod_yaml(y: &str) -> core::Pod {
    serde_norway::from_str(y).unwrap()
}

#[test]
fn a_podgroup_spec_is_read_whole_or_refused_with_the_field_named() {
    let spec = |v: serde_json::Value| podgroup_spec("ml/pg", Some(&v));
    let ok = spec(serde_json::json!({
        "minMember": 3,
        "scheduleTimeoutSeconds": 10,
        "minResources": {"cpu": "1500m", "memory": "1Gi", "nvidia.com/gpu": "4", "pods": "9"}
    }))
    .unwrap();
    assert_eq!(ok.min_member, 3);
    assert_eq!(ok.schedule_timeout_seconds, Some(10));
    let want = ok.min_resources.unwrap();
    assert_eq!(
        want.request,
        Resources {
            cpu_milli: 1500,
            memory_mib: 1024,
            gpus: 4
        }
    );
    assert!(want.extended.is_empty(), "pods is minMember's: {want:?}");
    assert_eq!(
        podgroup_spec("ml/pg", None).unwrap(),
        PodGroupSpec::default()
    );
    for (bad, says) in [
        (
            serde_json::json!({"minMember": -1}),
            "spec.minMember must not be negative",
        ),
        (
            serde_json::json!({"minMember": "2"}),
            "spec.minMember: invalid type",
        ),
        (
            serde_json::json!({"scheduleTimeoutSeconds": -5}),
            "scheduleTimeoutSeconds must not be negative",
        ),
        (
            serde_json::json!({"minResources": {"cpu": "lots"}}),
            "spec.minResources.cpu",
        ),
        (serde_json::json!([1]), "spec must be an object"),
    ] {
        let e = spec(bad.clone()).unwrap_err().to_string();
        assert!(
            e.starts_with("podgroup ml/pg: ") && e.contains(says),
            "{bad}: {e}"
        );
    }
}

#[test]
fn a_gang_worker_pod_translates_with_role_index_group_and_requests() {
    let p = pod_yaml(
        r#"
metadata:
  name: train-worker-2
  namespace: ml
  labels: {scheduling.x-k8s.io/pod-group: train, dragon.dev/role: worker, apps.kubernetes.io/pod-index: "2"}
spec:
  schedulerName: dragon-scheduler
  containers:
    - name: a
      image: x
      resources: {requests: {cpu: 1500m, memory: 4Gi, nvidia.com/gpu: "1"}}
    - name: b
      image: x
      resources: {requests: {cpu: 500m, memory: 1Gi}}
"#,
    );
    let t = pod(&p).unwrap();
    assert_eq!(t.key, "ml/train-worker-2");
    assert_eq!(t.job.as_deref(), Some("ml/train"));
    assert_eq!((t.role, t.index), (Role::Worker, 2));
    assert_eq!(
        t.request,
        Resources {
            cpu_milli: 2000,
            memory_mib: 5120,
            gpus: 1
        }
    );
}

#[test]
fn a_bad_role_or_quantity_names_the_pod() {
    let p = pod_yaml(
        "metadata: {name: p, namespace: d, labels: {dragon.dev/role: boss}}\nspec: {containers: []}\n",
    );
    assert!(
        pod(&p)
            .unwrap_err()
            .to_string()
            .contains("pod d/p: dragon.dev/role")
    );
    let p = pod_yaml(
        "metadata: {name: p}\nspec: {containers: [{name: a, resources: {requests: {cpu: lots}}}]}\n",
    );
    assert!(
        pod(&p)
            .unwrap_err()
            .to_string()
            .contains("cpu: invalid quantity")
    );
}

#[test]
fn a_node_that_is_not_ready_is_tainted_not_ready() {
    let n: core::Node = serde_norway::from_str(
            "metadata: {name: n1}\nstatus:\n  allocatable: {cpu: '32', memory: 128Gi, nvidia.com/gpu: '4'}\n  conditions: [{type: Ready, status: 'False'}]\n",
        )
        .unwrap();
    let t = node(&n).unwrap();
    assert_eq!(
        t.allocatable,
        Resources {
            cpu_milli: 32_000,
            memory_mib: 131_072,
            gpus: 4
        }
    );
    assert!(!t.unschedulable, "a cordon is spec.unschedulable alone");
    assert_eq!(t.taints, [Taint::not_ready()]);
}

#[test]
fn podgroup_bounds_default_to_the_worker_count() {
    let j = job(
        "ml/train",
        &PodGroupSpec {
            min_member: 5,
            ..PodGroupSpec::default()
        },
        &BTreeMap::new(),
        0,
        4,
    )
    .unwrap();
    assert_eq!(
        (j.workers, j.min_workers, j.max_workers, j.min_member),
        (4, 4, 4, 5)
    );
    let ann = BTreeMap::from([
        (MIN_WORKERS.to_string(), "2".to_string()),
        (MAX_WORKERS.to_string(), "8".to_string()),
    ]);
    let j = job("ml/train", &PodGroupSpec::default(), &ann, 0, 4).unwrap();
    assert_eq!((j.min_workers, j.max_workers), (2, 8));
    assert_eq!(j.progress_permille, None);
}

#[test]
fn podgroup_progress_is_a_fraction_kept_in_thousandths() {
    let at = |v: &str| {
        let ann = BTreeMap::from([(PROGRESS.to_string(), v.to_string())]);
        job("ml/train", &PodGroupSpec::default(), &ann, 0, 4)
    };
    assert_eq!(at("0.4215").unwrap().progress_permille, Some(422));
    assert_eq!(at("1").unwrap().progress_permille, Some(1000));
    for bad in ["1.5", "-0.1", "NaN", "half"] {
        let e = at(bad).unwrap_err().to_string();
        assert!(
            e.contains("podgroup ml/train") && e.contains(PROGRESS),
            "{e}"
        );
    }
}

#[test]
fn podgroup_speedup_is_kept_relative_to_one_worker_up_to_its_most_workers() {
    let at = |v: &str| {
        let ann = BTreeMap::from([
            (SPEEDUP.to_string(), v.to_string()),
            (MAX_WORKERS.to_string(), "3".to_string()),
        ]);
        job("ml/train", &PodGroupSpec::default(), &ann, 0, 2)
    };
    // Samples per second with 1..=4 workers; the job may have 3.
    let j = at("100, 190, 270, 330").unwrap();
    assert_eq!(j.speedup.as_milli(), [1000, 1900, 2700]);
    assert!(at("").unwrap().speedup.is_empty());
    for bad in ["1,fast", "1,0", "1,-3"] {
        let e = at(bad).unwrap_err().to_string();
        assert!(
            e.contains("podgroup ml/train") && e.contains(SPEEDUP),
            "{e}"
        );
    }
}

#[test]
fn effective_requests_follow_init_containers_sidecars_overhead_and_every_name() {
    // Sum of containers 1 cpu + sidecar 0.5; the init container needs
    // 2 cpu with the sidecar started before it running: 2.5 > 1.5.
    let p = pod_yaml(
        r#"
metadata: {name: p, namespace: d}
spec:
  overhead: {cpu: 100m}
  initContainers:
    - {name: side, restartPolicy: Always, resources: {requests: {cpu: 500m, rdma/hca: "1"}}}
    - {name: init, resources: {requests: {cpu: "2", ephemeral-storage: 1Gi}}}
  containers:
    - {name: a, resources: {requests: {cpu: "1", memory: 1Gi, amd.com/gpu: "2", example.com/zero: "0"}}}
"#,
    );
    let t = pod(&p).unwrap();
    assert_eq!(t.request.cpu_milli, 2600);
    assert_eq!(t.request.memory_mib, 1024);
    assert_eq!(
        t.extended,
        [
            ("amd.com/gpu".to_string(), 2),
            ("ephemeral-storage".to_string(), 1 << 30),
            ("rdma/hca".to_string(), 1),
        ]
        .into()
    );
}

#[test]
fn a_node_offers_every_resource_its_pod_count_and_whole_mib_rounded_down() {
    let n: core::Node = serde_norway::from_str(
            "metadata: {name: n1}\nstatus:\n  allocatable: {cpu: '8', memory: '1073741823', pods: '110', rdma/hca: '4', hugepages-2Mi: 1Gi}\n  conditions: [{type: Ready, status: 'True'}]\n",
        )
        .unwrap();
    let t = node(&n).unwrap();
    assert_eq!(t.allocatable.memory_mib, 1023);
    assert_eq!(t.max_pods, Some(110));
    assert_eq!(t.extended["rdma/hca"], 4);
    assert_eq!(t.extended["hugepages-2Mi"], 1 << 30);
}

#[test]
fn affinity_ports_and_spread_become_constraints() {
    let p = pod_yaml(
        r#"
metadata: {name: w0, namespace: ml, labels: {job: train, rev: "7"}}
spec:
  containers:
    - name: a
      ports: [{containerPort: 80, hostPort: 8080}, {containerPort: 81}]
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions: [{key: gpu, operator: Gt, values: ["2"]}]
            matchFields: [{key: metadata.name, operator: NotIn, values: [n9]}]
      preferredDuringSchedulingIgnoredDuringExecution:
        - {weight: 30, preference: {matchExpressions: [{key: disk, operator: In, values: [ssd]}]}}
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - labelSelector: {matchLabels: {job: train}}
          matchLabelKeys: [rev]
          topologyKey: kubernetes.io/hostname
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 40
          podAffinityTerm: {labelSelector: {matchLabels: {job: train}}, topologyKey: zone}
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - labelSelector: {matchLabels: {app: cache}}
          namespaceSelector: {}
          topologyKey: zone
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 70
          podAffinityTerm: {labelSelector: {matchLabels: {app: data}}, namespaces: [store], topologyKey: rack}
  topologySpreadConstraints:
    - {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {job: train}}, nodeTaintsPolicy: Honor}
    - {maxSkew: 1, topologyKey: rack, whenUnsatisfiable: ScheduleAnyway, labelSelector: {}}
"#,
    );
    let t = pod(&p).unwrap();
    let c = &pod_constraints(&p).unwrap();
    assert_eq!(c.host_ports, [HostPort::new("TCP", "0.0.0.0", 8080)]);
    let terms = &c.node_affinity.as_ref().unwrap().terms;
    assert_eq!(terms[0].match_expressions[0].operator, Operator::Gt);
    assert_eq!(terms[0].match_fields[0].values, ["n9"]);
    assert_eq!(c.preferred_node_affinity[0].weight, 30);
    assert_eq!(
        c.preferred_node_affinity[0].term.match_expressions[0].values,
        ["ssd"]
    );
    let anti = &c.pod_anti_affinity[0];
    // The own namespace by default; matchLabelKeys merged as In.
    assert_eq!(anti.namespaces.iter().collect::<Vec<_>>(), ["ml"]);
    let sel = anti.selector.as_ref().unwrap();
    assert_eq!(sel.match_expressions[0].key, "rev");
    assert_eq!(sel.match_expressions[0].values, ["7"]);
    assert!(c.pod_affinity[0].all_namespaces);
    // Preferred terms keep their weights and resolve namespaces as
    // required ones do.
    let near = &c.preferred_pod_affinity[0];
    assert_eq!((near.weight, near.term.topology_key.as_str()), (70, "rack"));
    assert_eq!(near.term.namespaces.iter().collect::<Vec<_>>(), ["store"]);
    let apart = &c.preferred_pod_anti_affinity[0];
    assert_eq!(
        (apart.weight, apart.term.topology_key.as_str()),
        (40, "zone")
    );
    assert_eq!(apart.term.namespaces.iter().collect::<Vec<_>>(), ["ml"]);
    // The hard spread constraint is a filter, the other a preference.
    assert_eq!(c.spread.len(), 1);
    assert!(c.spread[0].honor_taints && c.spread[0].honor_node_affinity);
    assert_eq!(c.preferred_spread.len(), 1);
    assert_eq!(c.preferred_spread[0].topology_key, "rack");
    assert_eq!(t.namespace, "ml");
    assert_eq!(t.labels["job"], "train");
}

#[test]
fn a_constraint_that_cannot_be_evaluated_names_its_field() {
    let cases = [
        (
            "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Near, values: [b]}]}]}}}",
            "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions: unknown operator \"Near\"",
        ),
        (
            "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Gt, values: [big]}]}]}}}",
            "Gt on \"a\" needs one integer value",
        ),
        (
            "affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: {}, topologyKey: zone, namespaceSelector: {matchLabels: {team: a}}}]}}",
            "affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaceSelector: selecting namespaces by label is not supported",
        ),
        (
            "affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: {matchExpressions: [{key: a, operator: Gt, values: ['1']}]}, topologyKey: zone}]}}",
            "labelSelector.matchExpressions: unknown operator \"Gt\"",
        ),
        (
            "affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 101, podAffinityTerm: {labelSelector: {}, topologyKey: zone}}]}}",
            "affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: must be 1 to 100, got 101",
        ),
        (
            "affinity: {podAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 5, podAffinityTerm: {labelSelector: {}, topologyKey: ''}}]}}",
            "affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey: must not be empty",
        ),
        (
            "topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: Sometimes}]",
            "topologySpreadConstraints[0].whenUnsatisfiable: unknown value \"Sometimes\"",
        ),
        (
            "topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, nodeAffinityPolicy: Maybe}]",
            "topologySpreadConstraints[0].nodeAffinityPolicy: unknown value \"Maybe\"",
        ),
        (
            "affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 0, preference: {matchExpressions: [{key: a, operator: Exists}]}}]}}",
            "affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: must be 1 to 100, got 0",
        ),
        (
            "containers: [{name: a, resources: {requests: {rdma/hca: many}}}]",
            "rdma/hca: invalid quantity \"many\"",
        ),
    ];
    for (spec, want) in cases {
        let mut y = format!("metadata: {{name: p, namespace: d}}\nspec:\n  {spec}\n");
        if !spec.starts_with("containers") {
            y.push_str("  containers: []\n");
        }
        let p = pod_yaml(&y);
        let e = pod(&p)
            .and_then(|_| pod_constraints(&p))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("pod d/p: "), "{e}");
        assert!(e.contains(want), "{e}\nwanted: {want}");
    }
}

#[test]
fn kubeflow_and_indexed_job_pods_get_their_role_and_index() {
    let p = pod_yaml(
        "metadata: {name: tf-ps-1, labels: {training.kubeflow.org/replica-type: ps, training.kubeflow.org/replica-index: '1', scheduling.x-k8s.io/pod-group: tf}}\nspec: {containers: []}\n",
    );
    let t = pod(&p).unwrap();
    assert_eq!((t.role, t.index), (Role::Ps, 1));
    assert_eq!(t.job.as_deref(), Some("default/tf"));
    let p = pod_yaml(
        "metadata: {name: tf-chief-0, labels: {training.kubeflow.org/replica-type: chief, training.kubeflow.org/replica-index: '0'}}\nspec: {containers: []}\n",
    );
    assert_eq!(pod(&p).unwrap().role, Role::Other);
    let p = pod_yaml(
        "metadata: {name: j-3, labels: {batch.kubernetes.io/job-completion-index: '3', dragon.dev/role: worker}}\nspec: {containers: []}\n",
    );
    assert_eq!(pod(&p).unwrap().index, 3);
    let p = pod_yaml(
        "metadata: {name: j, labels: {training.kubeflow.org/replica-index: x}}\nspec: {containers: []}\n",
    );
    assert!(
        pod(&p)
            .unwrap_err()
            .to_string()
            .contains("training.kubeflow.org/replica-index must be a whole number")
    );
}

#[test]
fn a_pods_device_claims_are_named_by_the_pod_or_its_status() {
    let p = pod_yaml(
        "metadata: {name: p, namespace: d}\nspec:\n  containers: [{name: a, resources: {claims: [{name: gpu}]}}]\n  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}, {name: shared, resourceClaimName: all}]\n",
    );
    let e = devices::device_claims(&p).unwrap_err().to_string();
    assert_eq!(e, "pod \"d/p\": ResourceClaim not created yet");
    let mut p = p;
    p.status = Some(
        serde_norway::from_str(
            "resourceClaimStatuses: [{name: gpu, resourceClaimName: p-gpu-x7k2q}]",
        )
        .unwrap(),
    );
    assert_eq!(
        devices::device_claims(&p),
        Ok(vec!["d/p-gpu-x7k2q".to_string(), "d/all".to_string()])
    );
    // Its requests still read: bound by another scheduler, it counts.
    assert!(pod(&p).is_ok());
}

#[test]
fn trainer_v2_pods_are_read_by_the_replicated_job_jobset_labels_them_with() {
    // As JobSet and the Job controller label the pods of a TrainJob `tj`
    // whose runtime has an initializer and the trainer's `node` job, and
    // Trainer's coscheduling plugin puts them in PodGroup `tj`.
    let jobset_pod = |name: &str, replicated: &str, index: &str| {
        pod_yaml(&format!(
            "metadata: {{name: {name}, labels: {{scheduling.x-k8s.io/pod-group: tj, \
             jobset.sigs.k8s.io/jobset-name: tj, jobset.sigs.k8s.io/replicatedjob-name: {replicated}, \
             jobset.sigs.k8s.io/job-index: '0', batch.kubernetes.io/job-completion-index: '{index}'}}}}\n\
             spec: {{containers: []}}\n"
        ))
    };
    let node = pod(&jobset_pod("tj-node-0-2", "node", "2")).unwrap();
    assert_eq!((node.role, node.index), (Role::Worker, 2));
    assert_eq!(node.job.as_deref(), Some("default/tj"));
    let init = pod(&jobset_pod(
        "tj-model-initializer-0-0",
        "model-initializer",
        "0",
    ))
    .unwrap();
    assert_eq!(
        (init.role, init.job.as_deref()),
        (Role::Other, Some("default/tj"))
    );
    // Dragon's own label still wins.
    let mut p = jobset_pod("tj-node-0-0", "node", "0");
    p.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert(ROLE.into(), "ps".into());
    assert_eq!(pod(&p).unwrap().role, Role::Ps);
}
