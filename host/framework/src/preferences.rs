//! Soft constraints in the final choice of a node, as kube-scheduler's
//! NodeAffinity (preferred terms) and TaintToleration (`PreferNoSchedule`)
//! score plugins weigh them. Interface 0.1 shows a policy only the
//! capacity columns, so the host combines: the policy's scores scaled to
//! 0–100 at weight 1, plus each preference scaled to 0–100 at kube's
//! default weight (node affinity 2, taints 3). A pod with no preference on
//! nodes without `PreferNoSchedule` taints keeps the policy's choice
//! untouched.

use super::cluster::Cluster;
use super::model::Pod;

/// kube-scheduler's default score plugin weights.
const NODE_AFFINITY_WEIGHT: u64 = 2;
const TAINT_WEIGHT: u64 = 3;
const MAX_SCORE: u64 = 100;

fn prefer_no_schedule_untolerated(pod: &Pod, node: &super::model::Node) -> u64 {
    node.taints
        .iter()
        .filter(|t| t.effect == "PreferNoSchedule")
        .filter(|t| !pod.tolerations.iter().any(|tol| tol.tolerates(t)))
        .count() as u64
}

/// `raw` scaled so its largest value is 100 (all 0 when all are 0), as
/// kube's `DefaultNormalizeScore`; `reverse` turns it around (fewer is
/// better).
fn normalize(raw: &[u64], reverse: bool) -> Vec<u64> {
    let max = raw.iter().copied().max().unwrap_or(0);
    raw.iter()
        .map(|&v| {
            let s = (v * MAX_SCORE).checked_div(max).unwrap_or(0);
            if reverse { MAX_SCORE - s } else { s }
        })
        .collect()
}

/// The position in `index` (candidate node indices) to place `pod` on,
/// when preferences apply; `None` leaves the choice to the policy's scores
/// (or the first candidate).
pub(crate) fn choose(
    cluster: &Cluster,
    pod: &Pod,
    index: &[u32],
    policy_scores: Option<&[u32]>,
) -> Option<usize> {
    let preferred = &pod.constraints.preferred_node_affinity;
    if preferred.is_empty() && !cluster.has_soft_taints() {
        return None;
    }
    let nodes = cluster.nodes();
    let taints: Vec<u64> = index
        .iter()
        .map(|&i| prefer_no_schedule_untolerated(pod, &nodes[i as usize]))
        .collect();
    if preferred.is_empty() && taints.iter().all(|&t| t == 0) {
        return None;
    }
    let affinity: Vec<u64> = index
        .iter()
        .map(|&i| {
            let node = &nodes[i as usize];
            preferred
                .iter()
                .filter(|p| p.term.matches(&node.name, &node.labels))
                .map(|p| u64::from(p.weight))
                .sum()
        })
        .collect();
    let policy: Vec<u64> = match policy_scores {
        Some(scores) => {
            // Min–max to 0–100: only the policy's order between candidates
            // counts, not its scale.
            let (lo, hi) = (
                scores.iter().copied().min().unwrap_or(0),
                scores.iter().copied().max().unwrap_or(0),
            );
            scores
                .iter()
                .map(|&s| {
                    if hi == lo {
                        0
                    } else {
                        u64::from(s - lo) * MAX_SCORE / u64::from(hi - lo)
                    }
                })
                .collect()
        }
        None => vec![0; index.len()],
    };
    let affinity = normalize(&affinity, false);
    let taints = normalize(&taints, true);
    let mut best = 0;
    let mut best_total = 0;
    for j in 0..index.len() {
        let total = policy[j] + NODE_AFFINITY_WEIGHT * affinity[j] + TAINT_WEIGHT * taints[j];
        // Ties to the lowest node index, as without preferences.
        if j == 0 || total > best_total {
            best = j;
            best_total = total;
        }
    }
    Some(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constraints::PreferredTerm;
    use crate::model::{Node, Resources, Taint, Toleration};
    use crate::selector::{NodeSelectorTerm, Operator, Requirement};

    fn cluster() -> Cluster {
        let mut c = Cluster::new();
        for (name, disk, taint) in [
            ("n0", "hdd", false),
            ("n1", "ssd", false),
            ("n2", "ssd", true),
        ] {
            let mut n = Node::new(name, Resources::default());
            n.labels.insert("disk".into(), disk.into());
            if taint {
                n.taints.push(Taint {
                    key: "busy".into(),
                    value: String::new(),
                    effect: "PreferNoSchedule".into(),
                });
            }
            c.add_node(n).unwrap();
        }
        c
    }

    fn prefers_ssd(weight: u32) -> PreferredTerm {
        PreferredTerm {
            weight,
            term: NodeSelectorTerm {
                match_expressions: vec![Requirement {
                    key: "disk".into(),
                    operator: Operator::In,
                    values: vec!["ssd".into()],
                }],
                match_fields: vec![],
            },
        }
    }

    #[test]
    fn preferences_outweigh_the_policys_order_as_kube_weighs_them() {
        let c = cluster();
        let all = [0, 1, 2];
        // No preference: n2's PreferNoSchedule taint still counts (kube's
        // TaintToleration score), so the policy's favourite n2 loses.
        let plain = Pod::new("p", Resources::default());
        assert_eq!(choose(&c, &plain, &all, Some(&[0, 0, 9])), Some(0));
        // Without any soft constraint in play, the policy decides alone.
        assert_eq!(choose(&c, &plain, &[0, 1], Some(&[0, 9])), None);
        // Preferring ssd: n1 (ssd, untainted) over n0 even when the
        // policy scores n0 highest.
        let mut p = plain.clone();
        p.constraints.preferred_node_affinity = vec![prefers_ssd(50)];
        assert_eq!(choose(&c, &p, &all, Some(&[9, 0, 0])), Some(1));
        // Tolerating the taint: ssd nodes tie on preferences, the policy
        // breaks the tie.
        p.tolerations = vec![Toleration {
            key: "busy".into(),
            operator: "Exists".into(),
            ..Toleration::default()
        }];
        assert_eq!(choose(&c, &p, &all, Some(&[0, 1, 5])), Some(2));
        // Without policy scores, the lowest index among the best.
        assert_eq!(choose(&c, &p, &all, None), Some(1));
    }
}
