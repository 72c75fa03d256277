//! The job model against the numbers Pollux's artifact computes from the
//! same tables (`traces/pollux/reference`, made by its `make.py`).

use super::*;

const THROUGHPUT: &str = include_str!("../../../traces/pollux/reference/throughput.csv");
const ALONE: &str = include_str!("../../../traces/pollux/reference/alone.csv");

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
        measured > 90 && wide.len() > 90,
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
        let got = m.run_time_s(batch, &packed(replicas, GPUS_PER_NODE));
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
