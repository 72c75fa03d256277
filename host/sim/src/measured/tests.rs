//! The job model against the numbers Pollux's artifact computes from the
//! same tables (`traces/pollux/reference`, made by its `make.py`).

use super::*;

const THROUGHPUT: &str = include_str!("../../traces/pollux/reference/throughput.csv");
const ALONE: &str = include_str!("../../traces/pollux/reference/alone.csv");

fn model(name: &str) -> Arc<Measurements> {
    Measurements::bundled(name).unwrap_or_else(|| panic!("bundled model {name}"))
}

fn records(text: &str) -> Vec<csv::StringRecord> {
    csv::Reader::from_reader(text.as_bytes())
        .records()
        .map(|r| r.expect("reference row"))
        .collect()
}

#[test]
fn every_bundled_model_reads() {
    for name in Measurements::bundled_names() {
        let m = model(name);
        assert!(m.init_batch_size < m.max_batch_size, "{name}");
        assert!(m.min_local_bsz <= m.max_local_bsz, "{name}");
        assert!(m.progress(m.epochs) > m.progress(1), "{name}");
    }
    assert_eq!(model("yolov3").max_local_bsz, 8, "the artifact's cap");
    assert_eq!(model("cifar10").epochs, 100);
}

#[test]
fn step_times_are_the_artifacts_where_measured_and_close_where_interpolated() {
    let (mut measured, mut wide) = (0, Vec::new());
    for r in records(THROUGHPUT) {
        let m = model(&r[0]);
        let placement: Vec<u32> = r[1].split('-').map(|g| g.parse().unwrap()).collect();
        let bsz: u32 = r[2].parse().unwrap();
        let want: (f64, f64) = (r[3].parse().unwrap(), r[4].parse().unwrap());
        let got = m.step_time(&placement, bsz);
        if placement.len() <= 4 {
            measured += 1;
            for (g, w) in [(got.0, want.0), (got.1, want.1)] {
                assert!(
                    (g - w).abs() <= 1e-9 * w.max(1e-3),
                    "{} {placement:?} at {bsz}: {g} vs the artifact's {w}",
                    &r[0]
                );
            }
        } else {
            wide.push(((got.0 - want.0) / want.0).abs());
        }
    }
    assert!(
        measured > 100 && wide.len() > 130,
        "{measured} {}",
        wide.len()
    );
    // Wide placements: the artifact triangulates scattered points, this
    // interpolates along measured lines (docs/simulator.md).
    wide.sort_by(f64::total_cmp);
    let median = wide[wide.len() / 2];
    let p90 = wide[wide.len() * 9 / 10];
    let worst = wide[wide.len() - 1];
    println!(
        "wide placements: step-time difference median {median:.4}, 90th percentile {p90:.4}, worst {worst:.4}"
    );
    assert!(
        median < 0.01 && p90 < 0.12,
        "median {median}, 90th percentile {p90}"
    );
}

#[test]
fn a_job_alone_takes_as_long_as_the_artifact_steps_it() {
    let mut worst = 0.0_f64;
    for r in records(ALONE) {
        let m = model(&r[0]);
        let replicas: u32 = r[1].parse().unwrap();
        let batch: u32 = r[2].parse().unwrap();
        let want: f64 = r[3].parse().unwrap();
        let got = m.run_time_s(Batch::Fixed(batch), &packed(replicas, GPUS_PER_NODE));
        // The artifact rounds each epoch's end to a whole second.
        let slack = 0.5 * m.epochs as f64 + 1.0;
        assert!(
            (got - want).abs() <= slack,
            "{} at {replicas} replicas, batch {batch}: {got:.1} s vs the artifact's {want} s",
            &r[0]
        );
        worst = worst.max((got - want).abs() / want);
    }
    println!("alone run times: worst relative difference {worst:.4}");
}

#[test]
fn a_fixed_batch_splits_as_in_the_artifact() {
    let c = model("cifar10");
    // 2048 over 6: 342 per GPU, within the measured range.
    assert_eq!(
        c.local_batch(2048, 6),
        LocalBatch {
            atomic_bsz: 342,
            accum_steps: 0
        }
    );
    // One replica above the smallest batch accumulates at least once.
    let one = c.local_batch(256, 1);
    assert_eq!(one.accum_steps, 1);
    assert_eq!(one.atomic_bsz, 128);
    // Past the per-GPU cap, passes accumulate.
    let y = model("yolov3");
    assert_eq!(
        y.local_batch(64, 4),
        LocalBatch {
            atomic_bsz: 8,
            accum_steps: 1
        }
    );
}

#[test]
fn placements_are_keyed_by_their_smallest_rotation() {
    assert_eq!(canonical(&[4, 2]), vec![2, 4]);
    assert_eq!(canonical(&[2, 1, 1, 2]), vec![1, 1, 2, 2]);
    assert_eq!(canonical(&[3, 0, 1]), vec![1, 3]);
    assert_eq!(packed(10, 4), vec![4, 4, 2]);
    let b = model("bert");
    assert_eq!(b.step_time(&[4, 2], 8), b.step_time(&[2, 4], 8));
}

#[test]
fn a_malformed_table_is_named() {
    let e = Measurements::parse(
        "m",
        "placement,local_bsz,step_time,sync_time\n1,x,1,1\n",
        "",
        &[],
        1,
        None,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("measurements of `m`, placements.csv: row 2"),
        "{e}"
    );
    let ok_placements = "placement,local_bsz,step_time,sync_time\n1,4,1,0.1\n";
    let scal = "num_nodes,num_replicas,local_bsz,step_time,sync_time\n6,6,4,1,0.5\n";
    let run = "progress,iteration,metric,grad_sqr,grad_var\n1,1,1,1,1\n";
    let e = Measurements::parse("m", ok_placements, scal, &[(8, run)], 3, None).unwrap_err();
    assert!(
        e.to_string()
            .contains("3 epochs asked, the runs measured 1"),
        "{e}"
    );
}

#[test]
fn an_adaptive_job_runs_at_the_best_goodput_it_can_find() {
    for name in Measurements::bundled_names() {
        let m = model(name);
        for placement in [vec![1], vec![4], vec![4, 4], vec![4, 4, 4, 4]] {
            let replicas: u32 = placement.iter().sum();
            for epoch in [0, m.epochs / 2, m.epochs - 1] {
                let chosen = m.chosen(&placement, Batch::Adaptive, epoch);
                let best = m.goodput(&placement, chosen, epoch);
                // Never below the smallest batch it may run, split as it would.
                let smallest = m.init_batch_size.max(m.min_local_bsz * replicas);
                let floor = m.split(f64::from(smallest), replicas, false);
                assert!(
                    best >= m.goodput(&placement, floor, epoch) * (1.0 - 1e-12),
                    "{name} {placement:?} epoch {epoch}"
                );
                let batch = replicas * chosen.atomic_bsz * (chosen.accum_steps + 1);
                assert!(batch <= m.max_batch_size, "{name}: {batch}");
            }
        }
        // Adapting its batch, a job alone never takes longer than at the
        // smallest batch measured.
        let p = packed(8, GPUS_PER_NODE);
        let fixed = m.run_time_s(
            Batch::Fixed(
                m.init_batch_size
                    .max(8 * m.min_local_bsz)
                    .min(m.max_batch_size),
            ),
            &p,
        );
        assert!(
            m.run_time_s(Batch::Adaptive, &p) <= fixed * 1.0001,
            "{name}"
        );
    }
    // More GPUs make the best batch larger (cifar10, late in training).
    let c = model("cifar10");
    let at = |p: &[u32]| {
        let s = c.chosen(p, Batch::Adaptive, 90);
        p.iter().sum::<u32>() * s.atomic_bsz * (s.accum_steps + 1)
    };
    assert!(
        at(&[4, 4, 4, 4]) > at(&[1]),
        "{} vs {}",
        at(&[4, 4, 4, 4]),
        at(&[1])
    );
}

#[test]
fn the_epoch_follows_progress() {
    let c = model("cifar10");
    assert_eq!(c.epoch_at(0.0), 0);
    assert_eq!(c.epoch_at(c.progress(1)), 1);
    assert_eq!(c.epoch_at(c.progress(1) - 1e-6), 0);
    assert_eq!(c.epoch_at(c.total_progress()), c.epochs - 1);
    let (_, until) = c.rate(Batch::Fixed(2048), &[4, 2], c.progress(3) + 1.0);
    assert_eq!(until, c.progress(4));
}

/// What a measured job reports as its speed-up is its whole run's goodput
/// by size, relative to one worker (`Speed::reported_speedup`).
#[test]
fn a_measured_job_reports_its_whole_runs_speedup() {
    let imagenet = model("imagenet");
    let job = crate::speed::Speed::Measured(MeasuredJob {
        model: Arc::new(Model::untyped(imagenet.clone())),
        batch: Batch::Adaptive,
    });
    let s = job.reported_speedup(16);
    assert_eq!(s.as_milli().len(), 16);
    assert_eq!(s.as_milli()[0], 1000);
    for w in [2, 5, 16] {
        let whole = imagenet.run_time_s(Batch::Adaptive, &packed(1, GPUS_PER_NODE))
            / imagenet.run_time_s(Batch::Adaptive, &packed(w, GPUS_PER_NODE));
        let reported = f64::from(s.as_milli()[w as usize - 1]) / 1000.0;
        assert!(
            (reported - whole).abs() < 1e-3,
            "{w}: {reported} vs {whole}"
        );
    }
    assert!(s.as_milli()[15] > 4000, "{s:?}");
    let modelled = crate::speed::Speed::Modelled(crate::speed::SpeedModel::DEFAULT);
    assert!(modelled.reported_speedup(16).is_empty());
}

/// A model measured on two GPU types runs at each type's pace, at the
/// slowest's when its workers hold nodes of both, and at its first type's
/// on a node of a type it was not measured on.
#[test]
fn a_model_runs_at_the_pace_of_the_gpu_types_it_holds() {
    let (dir, spec) = by_gpu::fixture::two_types("pace");
    let typed = Arc::new(Model::load(&dir, &spec).unwrap());
    assert_eq!(typed.gpu_types().collect::<Vec<_>>(), ["fast", "slow"]);
    let job = MeasuredJob {
        model: typed.clone(),
        batch: Batch::Fixed(2048),
    };
    let done = 10.0;
    let rate = |placement: &[u32], types: &[Option<&str>]| job.rate(placement, types, done).0;
    let (slow, fast) = (rate(&[4], &[Some("slow")]), rate(&[4], &[Some("fast")]));
    assert!((fast / slow - 2.0).abs() < 1e-9, "{fast} vs {slow}");
    // The bundled tables are the slow type's.
    let bundled = model("cifar10").rate(Batch::Fixed(2048), &[4], done).0;
    assert!((slow - bundled).abs() < 1e-12);
    assert_eq!(
        rate(&[4, 4], &[Some("fast"), Some("slow")]),
        rate(&[4, 4], &[Some("slow")])
    );
    assert_eq!(rate(&[4], &[Some("V100")]), slow);
    assert_eq!(rate(&[4], &[None]), slow);
    // The epoch ends at the same progress whatever the type.
    assert_eq!(
        job.rate(&[4], &[Some("fast")], done).1,
        job.rate(&[4], &[Some("slow")], done).1
    );

    let calibrated = ModelSpec {
        slowdown: Some(1.8),
        restart_s: Some(50.0),
        ..spec.clone()
    };
    let slowed = Model::load(&dir, &calibrated).unwrap();
    assert_eq!(slowed.restart_s, Some(50.0));
    let r = slowed
        .on(Some("fast"))
        .rate(Batch::Fixed(2048), &[4], done)
        .0;
    assert!((r * 1.8 / fast - 1.0).abs() < 1e-9, "{r} vs {fast}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A model directory or description that cannot be used is refused, named.
#[test]
fn a_wrong_model_directory_is_named() {
    let (dir, spec) = by_gpu::fixture::two_types("wrong");
    let err = |spec: &ModelSpec| format!("{:#}", Model::load(&dir, spec).unwrap_err());
    let missing = ModelSpec {
        gpu_types: vec!["slow".into(), "A100".into()],
        ..spec.clone()
    };
    let e = err(&missing);
    assert!(e.contains("A100") && e.contains("placements.csv"), "{e}");
    let escape = ModelSpec {
        name: "..".into(),
        ..spec.clone()
    };
    assert!(
        err(&escape).contains("one directory name"),
        "{}",
        err(&escape)
    );
    let cap = ModelSpec {
        max_local_bsz: [("T4".to_string(), 8)].into(),
        ..spec.clone()
    };
    assert!(
        err(&cap).contains("`T4` is not one of its gpu_types"),
        "{}",
        err(&cap)
    );
    let twice = load_all(&dir, &[spec.clone(), spec.clone()]).unwrap_err();
    assert!(twice.to_string().contains("listed twice"), "{twice}");
    let too_long = ModelSpec {
        epochs: 101,
        ..spec
    };
    assert!(
        err(&too_long).contains("101 epochs asked, the runs measured 100"),
        "{}",
        err(&too_long)
    );
    let _ = std::fs::remove_dir_all(dir);
}
