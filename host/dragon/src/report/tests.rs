use super::plots::bucketed;
use super::*;
use dragon_sim::engine::Point;

fn p(t_ms: u64, busy: u64) -> Point {
    Point {
        t_ms,
        gpus_allocated: busy,
        gpus_busy: busy,
        queued: 0,
        running: 0,
        stalled: 0,
        done: 0,
    }
}

#[test]
fn buckets_are_time_averages() {
    // 4 GPUs busy for the first quarter, 0 after.
    let tl = vec![p(0, 4), p(250, 0)];
    let b = bucketed(&tl, 1000, 2, |p| p.gpus_busy as f64);
    assert_eq!(b, vec![(250.0, 2.0), (750.0, 0.0)]);
    // Segment ends that fall on bucket edges which are not exact in
    // floating point must not spill the rest of a segment into one bucket.
    let tl = vec![p(0, 16), p(180_000, 0), p(12_345_678, 8)];
    let b = bucketed(&tl, 17_892_000, 240, |p| p.gpus_busy as f64);
    assert!(b.iter().all(|x| x.1 <= 16.0 + 1e-9), "{b:?}");
    let total: f64 = b.iter().map(|x| x.1).sum::<f64>() * 17_892_000.0 / 240.0;
    let exact = 16.0 * 180_000.0 + 8.0 * (17_892_000.0 - 12_345_678.0);
    assert!((total - exact).abs() < 1e-3 * exact, "{total} vs {exact}");
    let tl = vec![p(0, 4), p(250, 0)];
    let b = bucketed(&tl, 1000, 4, |p| p.gpus_busy as f64);
    assert_eq!(
        b.iter().map(|x| x.1).collect::<Vec<_>>(),
        vec![4.0, 0.0, 0.0, 0.0]
    );
}

#[test]
fn human_durations() {
    assert_eq!(human(59.0), "59 s");
    assert_eq!(human(600.0), "10.0 min");
    assert_eq!(human(3.0 * 3600.0), "3.00 h");
    assert_eq!(human(4.0 * 86400.0), "4.00 d");
}

#[test]
fn ratios_say_direction() {
    assert_eq!(ratio(100.0, 35.0), "0.35x (-65 %)");
    assert_eq!(ratio(0.5, 0.6), "1.20x (+20 %)");
    assert_eq!(ratio(0.0, 0.0), "=");
    assert_eq!(short_ratio(100.0, 35.0), "0.35x");
    assert_eq!(short_ratio(0.0, 1.0), "n/a");
}

#[test]
fn a_long_label_is_cut_to_its_column_with_the_cut_marked() {
    assert_eq!(fit_label("dragon"), "dragon");
    let long = "dragon-plus with a very long settings string";
    let fit = fit_label(long);
    assert_eq!(fit.chars().count(), LABEL_COLUMN);
    assert!(fit.ends_with('…') && long.starts_with(fit.trim_end_matches('…')));
}

#[test]
fn a_csv_field_is_quoted_only_where_it_must_be() {
    let rows = vec![
        vec!["plain".to_string(), String::new()],
        vec!["a,b".to_string(), "say \"hi\"".to_string()],
        vec!["two\nlines".to_string(), "1.500".to_string()],
    ];
    assert_eq!(
        to_csv(&["name", "value"], rows.into_iter()),
        "name,value\nplain,\n\"a,b\",\"say \"\"hi\"\"\"\n\"two\nlines\",1.500\n"
    );
}
