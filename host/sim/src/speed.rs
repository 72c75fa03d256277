//! How fast a job trains at a given size and placement.
//!
//! A job's work is measured in seconds of training at its requested worker
//! count with every task on one node (`duration_s` in the trace). At `w`
//! workers spanning `s` nodes it progresses at
//!
//! ```text
//! rate(w, s) = throughput(w, s) / throughput(requested, 1)
//! throughput(w, s) = w ^ scaling_exponent × (1 − cross_node_penalty if s > 1 else 1)
//! ```
//!
//! The power law is sub-linear (adding workers helps less and less); the
//! penalty is paid once a job's tasks leave a single node, when gradient
//! traffic goes over the network instead of PCIe/NVLink. A trace with
//! topology levels gives each level a penalty of its own: a job whose tasks
//! span several domains of a level pays the penalty of the widest such
//! level instead, when it is the larger (crossing racks costs more than
//! crossing nodes in a rack). `docs/simulator.md` cites the measurements
//! the defaults come from.
//!
//! A job of a measured model ([`super::measured`]) instead does its work
//! in Pollux's statistical progress, at the goodput its measurements give
//! for its placement, batch and epoch.

use serde::Serialize;

use dragon_framework::{MAX_SPEEDUP_ENTRIES, Speedup};

use super::measured::{self, MeasuredJob};

/// How a job's speed is known.
#[derive(Debug, Clone, PartialEq)]
pub enum Speed {
    /// The power law and penalties above.
    Modelled(SpeedModel),
    /// Pollux's measurements of its model.
    Measured(MeasuredJob),
}

impl Speed {
    /// The job's whole work in the units [`Speed::rate`] runs through, for
    /// a job of `work_ms` reference milliseconds: those for a modelled job,
    /// its model's progress for a measured one.
    pub fn work(&self, work_ms: f64) -> f64 {
        match self {
            Speed::Modelled(_) => work_ms,
            Speed::Measured(job) => job.total_progress(),
        }
    }

    /// Work done per millisecond of wall time for a job submitted with
    /// `requested` workers that runs `workers` with `pods` of its pods on
    /// each node it uses, crossing domains of a level with penalty
    /// `crossing` (the modelled speed's; measurements include their own),
    /// once it has done `done` of its work; and the work done at which that
    /// rate next changes (infinite: never). A measured job's pods are all
    /// workers, and `gpu_types` holds the GPU type of each node in `pods`
    /// (which the modelled speed ignores).
    pub fn rate(
        &self,
        workers: u32,
        pods: &[u32],
        gpu_types: &[Option<&str>],
        requested: u32,
        crossing: f64,
        done: f64,
    ) -> (f64, f64) {
        match self {
            Speed::Modelled(m) => {
                let nodes = pods.iter().filter(|&&p| p > 0).count() as u32;
                (
                    m.rate_crossing(workers, nodes, requested, crossing),
                    f64::INFINITY,
                )
            }
            Speed::Measured(job) => {
                let (per_s, until) = job.rate(pods, gpu_types, done);
                (per_s / 1000.0, until)
            }
        }
    }

    /// How much faster than at its submitted size, on one node (a measured
    /// job: packed), the job runs all its work at `workers` packed onto
    /// nodes of `per_node` workers each (the modelled speed with `span`
    /// nodes and `crossing`).
    pub fn relative(
        &self,
        workers: u32,
        span: u32,
        per_node: u32,
        requested: u32,
        crossing: f64,
    ) -> f64 {
        match self {
            Speed::Modelled(m) => m.rate_crossing(workers, span, requested, crossing),
            Speed::Measured(job) => {
                job.run_time_s(&measured::packed(requested, measured::GPUS_PER_NODE))
                    / job.run_time_s(&measured::packed(workers, per_node))
            }
        }
    }

    /// What a job of this speed reports as its speed-up with 1 to `most`
    /// workers packed: a measured job's (an AdaptDL job measures its own
    /// goodput, as Pollux's agent does), over its whole run; nothing for a
    /// modelled one, whose curve a policy is left to assume.
    pub fn reported_speedup(&self, most: u32) -> Speedup {
        match self {
            Speed::Modelled(_) => Speedup::default(),
            Speed::Measured(job) => {
                let most = most.min(MAX_SPEEDUP_ENTRIES as u32);
                let goodputs = job.goodputs_by_size(most);
                Speedup::from_goodputs(&goodputs).unwrap_or_default()
            }
        }
    }

    /// The modelled speed, if it is one.
    pub fn modelled(&self) -> Option<&SpeedModel> {
        match self {
            Speed::Modelled(m) => Some(m),
            Speed::Measured(_) => None,
        }
    }
}

/// The speed model of one job.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SpeedModel {
    /// `α` in `throughput ∝ workers^α`; 1 is linear scaling.
    pub scaling_exponent: f64,
    /// Fraction of throughput lost when the job spans more than one node.
    pub cross_node_penalty: f64,
}

impl SpeedModel {
    /// Standard distributed TensorFlow (parameter servers) kept about half of
    /// ideal throughput at 128 GPUs (Sergeev & Del Balso 2018, the Horovod
    /// paper): `128^(α−1) = 0.5` gives `α ≈ 0.86`.
    pub const DEFAULT_SCALING_EXPONENT: f64 = 0.86;
    /// A mid value between the consolidation-insensitive models (ResNet,
    /// Inception: a few percent) and the sensitive ones (VGG, AlexNet: tens
    /// of percent) measured by Tiresias (NSDI'19) and Gandiva (OSDI'18).
    pub const DEFAULT_CROSS_NODE_PENALTY: f64 = 0.2;

    /// The documented defaults.
    pub const DEFAULT: SpeedModel = SpeedModel {
        scaling_exponent: SpeedModel::DEFAULT_SCALING_EXPONENT,
        cross_node_penalty: SpeedModel::DEFAULT_CROSS_NODE_PENALTY,
    };

    /// Relative throughput at `workers` workers spanning `nodes` nodes.
    pub fn throughput(&self, workers: u32, nodes: u32) -> f64 {
        self.throughput_crossing(workers, nodes, 0.0)
    }

    /// Relative throughput at `workers` workers spanning `nodes` nodes
    /// whose tasks cross domains of a level with penalty `crossing` (0:
    /// within one domain of every level).
    pub fn throughput_crossing(&self, workers: u32, nodes: u32, crossing: f64) -> f64 {
        let lost = if nodes > 1 {
            self.cross_node_penalty.max(crossing)
        } else {
            0.0
        };
        f64::from(workers.max(1)).powf(self.scaling_exponent) * (1.0 - lost)
    }

    /// Work done per second of wall time, in reference seconds (1.0 at the
    /// requested size on one node).
    pub fn rate(&self, workers: u32, nodes: u32, requested: u32) -> f64 {
        self.rate_crossing(workers, nodes, requested, 0.0)
    }

    /// [`SpeedModel::rate`] for tasks crossing domains of a level with
    /// penalty `crossing`.
    pub fn rate_crossing(&self, workers: u32, nodes: u32, requested: u32, crossing: f64) -> f64 {
        self.throughput_crossing(workers, nodes, crossing) / self.throughput(requested, 1)
    }
}

impl Default for SpeedModel {
    fn default() -> Self {
        SpeedModel::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_is_sub_linear() {
        let m = SpeedModel::DEFAULT;
        let one = m.throughput(1, 1);
        let mut last = one;
        for w in [2, 4, 8, 16, 128] {
            let t = m.throughput(w, 1);
            assert!(t > last, "more workers must still be faster: {w} -> {t}");
            assert!(t < one * f64::from(w), "but less than linearly: {w} -> {t}");
            last = t;
        }
        // Efficiency keeps falling.
        let eff = |w: u32| m.throughput(w, 1) / (f64::from(w) * one);
        assert!(eff(8) < eff(4) && eff(4) < eff(2));
        // The default reproduces ~50 % efficiency at 128 workers (Horovod paper).
        assert!((eff(128) - 0.5).abs() < 0.02, "{}", eff(128));
    }

    #[test]
    fn spanning_nodes_is_penalized() {
        let m = SpeedModel::DEFAULT;
        assert!(m.throughput(4, 2) < m.throughput(4, 1));
        assert_eq!(
            m.throughput(4, 2),
            m.throughput(4, 3),
            "the penalty is paid once the job leaves a node"
        );
        let none = SpeedModel {
            cross_node_penalty: 0.0,
            ..m
        };
        assert_eq!(none.throughput(4, 2), none.throughput(4, 1));
    }

    #[test]
    fn crossing_a_level_costs_its_penalty_when_it_is_above_the_node_one() {
        let m = SpeedModel::DEFAULT;
        let within = m.throughput(8, 2);
        assert_eq!(
            m.throughput_crossing(8, 2, 0.1),
            within,
            "below the node penalty"
        );
        let across = m.throughput_crossing(8, 2, 0.35);
        assert!((across / m.throughput(8, 1) - 0.65).abs() < 1e-12);
        assert_eq!(m.throughput_crossing(8, 1, 0.35), m.throughput(8, 1));
    }

    #[test]
    fn rate_is_one_at_the_requested_size_on_one_node() {
        let m = SpeedModel::DEFAULT;
        assert!((m.rate(4, 1, 4) - 1.0).abs() < 1e-12);
        assert!(
            m.rate(2, 1, 4) < 1.0 && m.rate(2, 1, 4) > 0.5,
            "half the workers, more than half the speed"
        );
        assert!(m.rate(8, 1, 4) > 1.0 && m.rate(8, 1, 4) < 2.0);
        assert!(m.rate(4, 2, 4) < 1.0);
    }
}
