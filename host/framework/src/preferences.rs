//! Soft constraints in the final choice of a node, as kube-scheduler's
//! score plugins weigh them: NodeAffinity (preferred terms),
//! TaintToleration (`PreferNoSchedule`), InterPodAffinity (preferred terms,
//! and placed pods' terms about the pod) and PodTopologySpread
//! (`ScheduleAnyway`). Interface 0.1 shows a policy only the capacity
//! columns, so the host combines: the policy's scores scaled to 0–100 at
//! weight 1, plus each preference scaled to 0–100 at kube's default weight
//! (node affinity 2, taints 3, inter-pod affinity 2, spread 2). A pod with
//! no preference, on nodes without `PreferNoSchedule` taints and among
//! placed pods without terms about others, keeps the policy's choice
//! untouched.

use std::collections::HashMap;

use super::cluster::Cluster;
use super::constraints::{SpreadConstraint, node_affinity_allows, tolerates_taints};
use super::model::{Node, Pod, TaintEffect};

/// kube-scheduler's default score plugin weights.
const NODE_AFFINITY_WEIGHT: u64 = 2;
const TAINT_WEIGHT: u64 = 3;
const INTER_POD_AFFINITY_WEIGHT: u64 = 2;
const SPREAD_WEIGHT: u64 = 2;
const MAX_SCORE: u64 = 100;
/// InterPodAffinity's `hardPodAffinityWeight` (its default): a placed
/// pod's required affinity term that the pod matches draws it like a
/// preferred term of this weight.
const HARD_POD_AFFINITY_WEIGHT: i64 = 1;
/// The node label kube-scheduler counts per node rather than per domain.
const HOSTNAME: &str = "kubernetes.io/hostname";

fn prefer_no_schedule_untolerated(pod: &Pod, node: &Node) -> u64 {
    node.taints
        .iter()
        .filter(|t| t.effect == TaintEffect::PreferNoSchedule)
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

/// `raw` scaled linearly onto 0–100, lowest to highest (all 0 when they
/// are equal): only the order between candidates counts, not the scale.
fn min_max(raw: &[i64]) -> Vec<u64> {
    let (lo, hi) = (
        raw.iter().copied().min().unwrap_or(0),
        raw.iter().copied().max().unwrap_or(0),
    );
    raw.iter()
        .map(|&v| {
            if hi == lo {
                0
            } else {
                // i128: weights times pod counts cannot overflow it.
                (i128::from(v - lo) * i128::from(MAX_SCORE) / i128::from(hi - lo)) as u64
            }
        })
        .collect()
}

/// Whether InterPodAffinity has anything to weigh for `pod`.
fn weighs_pod_affinity(cluster: &Cluster, pod: &Pod) -> bool {
    let c = &pod.constraints;
    !c.preferred_pod_affinity.is_empty()
        || !c.preferred_pod_anti_affinity.is_empty()
        || cluster.has_placed_weighing()
}

/// InterPodAffinity's raw score of each candidate: per (topology key,
/// value), the weights of the pod's preferred terms matched by placed pods
/// there (anti-affinity negative), plus placed pods' own terms that the
/// pod matches (their required affinity at `HARD_POD_AFFINITY_WEIGHT`).
/// `None` when no term applies anywhere (kube's Skip: the plugin adds
/// nothing).
fn inter_pod_affinity(cluster: &Cluster, pod: &Pod, index: &[u32]) -> Option<Vec<i64>> {
    let own = &pod.constraints;
    let nodes = cluster.nodes();
    // Topology key → value → score.
    let mut domains: HashMap<&str, HashMap<&str, i64>> = HashMap::new();
    let own_terms =
        !own.preferred_pod_affinity.is_empty() || !own.preferred_pod_anti_affinity.is_empty();
    // The pod's own terms look at every placed pod; otherwise only the
    // placed pods with terms of their own can add anything.
    let placed: Box<dyn Iterator<Item = (&Pod, usize)>> = if own_terms {
        Box::new(cluster.placed())
    } else {
        Box::new(cluster.placed_weighing())
    };
    for (other, n) in placed {
        let labels = &nodes[n].labels;
        let mut add = |key: &str, w: i64| {
            if let Some((k, v)) = labels.get_key_value(key) {
                *domains
                    .entry(k.as_str())
                    .or_default()
                    .entry(v.as_str())
                    .or_default() += w;
            }
        };
        for t in &own.preferred_pod_affinity {
            if t.term.matches(other) {
                add(&t.term.topology_key, i64::from(t.weight));
            }
        }
        for t in &own.preferred_pod_anti_affinity {
            if t.term.matches(other) {
                add(&t.term.topology_key, -i64::from(t.weight));
            }
        }
        let theirs = &other.constraints;
        for t in &theirs.pod_affinity {
            if t.matches(pod) {
                add(&t.topology_key, HARD_POD_AFFINITY_WEIGHT);
            }
        }
        for t in &theirs.preferred_pod_affinity {
            if t.term.matches(pod) {
                add(&t.term.topology_key, i64::from(t.weight));
            }
        }
        for t in &theirs.preferred_pod_anti_affinity {
            if t.term.matches(pod) {
                add(&t.term.topology_key, -i64::from(t.weight));
            }
        }
    }
    if domains.is_empty() {
        return None;
    }
    Some(
        index
            .iter()
            .map(|&i| {
                let labels = &nodes[i as usize].labels;
                domains
                    .iter()
                    .filter_map(|(k, values)| values.get(labels.get(*k)?.as_str()))
                    .sum()
            })
            .collect(),
    )
}

/// PodTopologySpread's score of each candidate for the pod's
/// `ScheduleAnyway` constraints, normalized to 0–100 (fewer matching pods
/// in the node's domains is better). A candidate without every
/// constraint's key scores 0; each constraint's count is weighted by the
/// log of its number of domains among the candidates, so a constraint over
/// few large domains does not drown one over many small ones.
fn spread(cluster: &Cluster, pod: &Pod, index: &[u32]) -> Vec<u64> {
    let constraints = &pod.constraints.preferred_spread;
    let nodes = cluster.nodes();
    let has_keys = |n: &Node| {
        constraints
            .iter()
            .all(|c| n.labels.contains_key(&c.topology_key))
    };
    let scored: Vec<bool> = index
        .iter()
        .map(|&i| has_keys(&nodes[i as usize]))
        .collect();
    let counted = |c: &SpreadConstraint, n: &Node| {
        (!c.honor_node_affinity || node_affinity_allows(pod, &n.name, &n.labels))
            && (!c.honor_taints || tolerates_taints(pod, n))
    };
    // Per constraint: matching pods per domain of a scored candidate (per
    // node for the hostname key), and the domains' count for the weight.
    let mut per_domain: Vec<HashMap<&str, i64>> = vec![HashMap::new(); constraints.len()];
    let mut per_node: Vec<HashMap<usize, i64>> = vec![HashMap::new(); constraints.len()];
    for (j, &i) in index.iter().enumerate() {
        if !scored[j] {
            continue;
        }
        let node = &nodes[i as usize];
        for (k, c) in constraints.iter().enumerate() {
            if c.topology_key == HOSTNAME {
                per_node[k].insert(i as usize, 0);
            } else {
                per_domain[k].insert(node.labels[&c.topology_key].as_str(), 0);
            }
        }
    }
    for (other, n) in cluster.placed() {
        let node = &nodes[n];
        if other.namespace != pod.namespace || !cluster.is_live(n) || !has_keys(node) {
            continue;
        }
        for (k, c) in constraints.iter().enumerate() {
            if !c
                .selector
                .as_ref()
                .is_some_and(|s| s.matches(&other.labels))
            {
                continue;
            }
            let count = if c.topology_key == HOSTNAME {
                per_node[k].get_mut(&n)
            } else {
                per_domain[k].get_mut(node.labels[&c.topology_key].as_str())
            };
            if let Some(count) = count
                && counted(c, node)
            {
                *count += 1;
            }
        }
    }
    let weights: Vec<f64> = (0..constraints.len())
        .map(|k| ((per_domain[k].len() + per_node[k].len()) as f64 + 2.0).ln())
        .collect();
    let raw: Vec<Option<i64>> = index
        .iter()
        .zip(&scored)
        .map(|(&i, &scored)| {
            scored.then(|| {
                let node = &nodes[i as usize];
                let total: f64 = constraints
                    .iter()
                    .enumerate()
                    .map(|(k, c)| {
                        let count = if c.topology_key == HOSTNAME {
                            per_node[k][&(i as usize)]
                        } else {
                            per_domain[k][node.labels[&c.topology_key].as_str()]
                        };
                        count as f64 * weights[k] + f64::from(c.max_skew - 1)
                    })
                    .sum();
                total.round() as i64
            })
        })
        .collect();
    let max = raw.iter().flatten().copied().max().unwrap_or(0);
    let min = raw.iter().flatten().copied().min().unwrap_or(0);
    raw.iter()
        .map(|s| match *s {
            None => 0,
            Some(_) if max == 0 => MAX_SCORE,
            Some(s) => (MAX_SCORE as i64 * (max + min - s) / max) as u64,
        })
        .collect()
}

/// How much `pod`'s soft constraints favour each candidate (node indices
/// `index`), each preference scaled to 0–100 and weighted as kube weighs
/// it; `None` when none applies.
pub(crate) fn weigh(cluster: &Cluster, pod: &Pod, index: &[u32]) -> Option<Vec<u64>> {
    let preferred = &pod.constraints.preferred_node_affinity;
    let soft_spread = !pod.constraints.preferred_spread.is_empty();
    let pod_affinity = weighs_pod_affinity(cluster, pod);
    if preferred.is_empty() && !cluster.has_soft_taints() && !soft_spread && !pod_affinity {
        return None;
    }
    let nodes = cluster.nodes();
    let taints: Vec<u64> = index
        .iter()
        .map(|&i| prefer_no_schedule_untolerated(pod, &nodes[i as usize]))
        .collect();
    let inter_pod = if pod_affinity {
        inter_pod_affinity(cluster, pod, index)
    } else {
        None
    };
    if preferred.is_empty() && taints.iter().all(|&t| t == 0) && !soft_spread && inter_pod.is_none()
    {
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
    let affinity = normalize(&affinity, false);
    let taints = normalize(&taints, true);
    let inter_pod = inter_pod.map_or_else(|| vec![0; index.len()], |raw| min_max(&raw));
    let spread = if soft_spread {
        spread(cluster, pod, index)
    } else {
        vec![0; index.len()]
    };
    Some(
        (0..index.len())
            .map(|j| {
                NODE_AFFINITY_WEIGHT * affinity[j]
                    + TAINT_WEIGHT * taints[j]
                    + INTER_POD_AFFINITY_WEIGHT * inter_pod[j]
                    + SPREAD_WEIGHT * spread[j]
            })
            .collect(),
    )
}

/// The position in the candidates to place the pod on, given what its
/// preferences weigh (`weighed`, from [`weigh`]); `None` (no preference
/// applies) leaves the choice to the policy's scores (or the first
/// candidate).
pub(crate) fn choose(weighed: Option<&[u64]>, policy_scores: Option<&[u32]>) -> Option<usize> {
    let weighed = weighed?;
    let policy: Vec<u64> = match policy_scores {
        Some(scores) => min_max(&scores.iter().map(|&s| i64::from(s)).collect::<Vec<_>>()),
        None => vec![0; weighed.len()],
    };
    let mut best = 0;
    let mut best_total = 0;
    for (j, w) in weighed.iter().enumerate() {
        let total = policy[j] + w;
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
    use crate::constraints::{PreferredTerm, WeightedPodAffinityTerm};
    use crate::fixtures::*;
    use crate::model::{Node, Resources, Taint, Toleration, TolerationOperator};
    use crate::selector::{LabelSelector, Labels};

    /// The choice for `pod` among `index` given the policy's scores.
    fn choose(c: &Cluster, pod: &Pod, index: &[u32], scores: Option<&[u32]>) -> Option<usize> {
        super::choose(weigh(c, pod, index).as_deref(), scores)
    }
    use crate::selector::{NodeSelectorTerm, Operator, Requirement};

    /// n0 (hdd), n1 (ssd), n2 (ssd, `PreferNoSchedule`).
    fn disks() -> Cluster {
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
                    effect: TaintEffect::PreferNoSchedule,
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
        let c = disks();
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
            operator: TolerationOperator::Exists,
            ..Toleration::default()
        }];
        assert_eq!(choose(&c, &p, &all, Some(&[0, 1, 5])), Some(2));
        // Without policy scores, the lowest index among the best.
        assert_eq!(choose(&c, &p, &all, None), Some(1));
    }

    /// InterPodAffinity's normalized score (0–100) of every node for `p`,
    /// as kube-scheduler's `TestPreferredAffinity` states it.
    fn pod_affinity_scores(c: &Cluster, p: &Pod) -> Vec<u64> {
        let all: Vec<u32> = (0..c.nodes().len() as u32).collect();
        inter_pod_affinity(c, p, &all).map_or_else(|| vec![0; all.len()], |raw| min_max(&raw))
    }

    fn weighted(weight: u32, l: &[(&str, &str)], key: &str) -> WeightedPodAffinityTerm {
        WeightedPodAffinityTerm {
            weight,
            term: term(l, key),
        }
    }

    const S1: &[(&str, &str)] = &[("security", "S1")];
    const S2: &[(&str, &str)] = &[("security", "S2")];
    const CHINA: &[(&str, &str)] = &[("region", "China")];
    const INDIA: &[(&str, &str)] = &[("region", "India")];
    const AZ1: &[(&str, &str)] = &[("az", "az1")];
    const AZ2: &[(&str, &str)] = &[("az", "az2")];

    /// Nodes n1.. with these labels, and pods placed on them.
    fn placed(nodes: &[&[(&str, &str)]], pods: Vec<(Pod, usize)>) -> Cluster {
        let names: Vec<String> = (1..=nodes.len()).map(|i| format!("n{i}")).collect();
        let spec: Vec<(&str, &[(&str, &str)])> = names
            .iter()
            .map(String::as_str)
            .zip(nodes.iter().copied())
            .collect();
        let mut c = cluster(&spec);
        for (p, n) in pods {
            place(&mut c, p, &names[n - 1]);
        }
        c
    }

    #[test]
    fn preferred_pod_affinity_draws_to_domains_with_more_matching_pods() {
        let stay_with_s1 = |p| {
            with(p, |c| {
                c.preferred_pod_affinity = vec![weighted(5, S1, "region")]
            })
        };
        // Matching pod and key: 100; a matching pod without the key, or the
        // key without a matching pod: 0.
        let c = placed(
            &[CHINA, INDIA, AZ1],
            vec![(pod("a", S1), 1), (pod("b", S2), 2), (pod("c", S1), 3)],
        );
        assert_eq!(
            pod_affinity_scores(&c, &stay_with_s1(pod("p", S1))),
            [100, 0, 0]
        );
        // Every node of the domain scores alike.
        let china_az1 = &[("region", "China"), ("az", "az1")][..];
        let c = placed(&[CHINA, china_az1, INDIA], vec![(pod("a", S1), 1)]);
        assert_eq!(
            pod_affinity_scores(&c, &stay_with_s1(pod("p", &[]))),
            [100, 100, 0]
        );
        // More matching pods in China than in India.
        let stay_with_s2 = with(pod("p", S1), |c| {
            c.preferred_pod_affinity = vec![weighted(6, S2, "region")]
        });
        let c = placed(
            &[CHINA, INDIA, CHINA, CHINA, INDIA],
            (0..6)
                .map(|i| (pod(&format!("s{i}"), S2), [1, 1, 2, 3, 4, 5][i]))
                .collect(),
        );
        assert_eq!(
            pod_affinity_scores(&c, &stay_with_s2),
            [100, 0, 100, 100, 0]
        );
        // Two terms of different weights: S2 pods match both (8 + 2), S1
        // pods the second only (2).
        let mut both = term(&[], "region");
        both.selector = Some(LabelSelector {
            match_labels: Labels::new(),
            match_expressions: vec![
                Requirement {
                    key: "security".into(),
                    operator: Operator::Exists,
                    values: vec![],
                },
                Requirement {
                    key: "wrongkey".into(),
                    operator: Operator::DoesNotExist,
                    values: vec![],
                },
            ],
        });
        let p = with(pod("p", S1), |c| {
            c.preferred_pod_affinity = vec![
                weighted(8, S2, "region"),
                WeightedPodAffinityTerm {
                    weight: 2,
                    term: both,
                },
            ]
        });
        let c = placed(
            &[CHINA, INDIA, AZ1],
            vec![(pod("a", S1), 1), (pod("b", S2), 2), (pod("c", S1), 3)],
        );
        assert_eq!(pod_affinity_scores(&c, &p), [20, 100, 0]);
    }

    #[test]
    fn preferred_anti_affinity_keeps_away_from_matching_pods() {
        let away_from_s1 = |p| {
            with(p, |c| {
                c.preferred_pod_anti_affinity = vec![weighted(5, S1, "az")]
            })
        };
        let c = placed(&[AZ1, CHINA], vec![(pod("a", S1), 1), (pod("b", S2), 2)]);
        assert_eq!(
            pod_affinity_scores(&c, &away_from_s1(pod("p", S1))),
            [0, 100]
        );
        // A node without the key is not in any domain.
        let c = placed(&[AZ1, CHINA], vec![(pod("a", S1), 1), (pod("b", S1), 2)]);
        assert_eq!(
            pod_affinity_scores(&c, &away_from_s1(pod("p", S1))),
            [0, 100]
        );
        // More matching pods, lower score.
        let c = placed(
            &[AZ1, INDIA],
            vec![(pod("a", S1), 1), (pod("b", S1), 1), (pod("c", S2), 2)],
        );
        assert_eq!(
            pod_affinity_scores(&c, &away_from_s1(pod("p", S1))),
            [0, 100]
        );
    }

    #[test]
    fn placed_pods_terms_weigh_on_the_pod_both_ways() {
        // Their required affinity the pod matches draws it (weight 1 per
        // term), though the pod has no terms itself.
        let hard = |p| {
            with(p, |c| {
                c.pod_affinity = vec![term(S1, "region"), term(&[], "region")];
                c.pod_affinity[1].selector = Some(LabelSelector {
                    match_labels: Labels::new(),
                    match_expressions: vec![Requirement {
                        key: "security".into(),
                        operator: Operator::Exists,
                        values: vec![],
                    }],
                });
            })
        };
        let c = placed(
            &[CHINA, INDIA, AZ1],
            vec![(hard(pod("a", S1)), 1), (hard(pod("b", S2)), 2)],
        );
        assert_eq!(pod_affinity_scores(&c, &pod("p", S1)), [100, 100, 0]);
        // Their preferred anti-affinity the pod matches keeps it away.
        let away = |from: &'static [(&str, &str)], p| {
            with(p, |c| {
                c.preferred_pod_anti_affinity = vec![weighted(5, from, "az")]
            })
        };
        let c = placed(
            &[AZ1, AZ2],
            vec![(away(S2, pod("a", S1)), 1), (away(S1, pod("b", S2)), 2)],
        );
        assert_eq!(pod_affinity_scores(&c, &pod("p", S2)), [0, 100]);
        // All four at once: its affinity (8 on n1), its anti-affinity (−5
        // on n2), a placed pod's affinity for it (8 on n3) and a placed
        // pod's anti-affinity against it (−5 on n4).
        let stay_s1_away_s2 = |p| {
            with(p, |c| {
                c.preferred_pod_affinity = vec![weighted(8, S1, "region")];
                c.preferred_pod_anti_affinity = vec![weighted(5, S2, "az")];
            })
        };
        let c = placed(
            &[CHINA, AZ1, INDIA, AZ2],
            vec![
                (pod("a", S1), 1),
                (pod("b", S2), 2),
                (stay_s1_away_s2(pod("c", &[])), 3),
                (away(S1, pod("d", &[])), 4),
            ],
        );
        assert_eq!(
            pod_affinity_scores(&c, &stay_s1_away_s2(pod("p", S1))),
            [100, 0, 100, 0]
        );
        // With nothing to weigh anywhere, nothing is scored.
        let c = placed(&[CHINA, INDIA], vec![(pod("a", S1), 1)]);
        assert!(!weighs_pod_affinity(&c, &pod("p", S1)));
    }

    fn soft_spread(key: &str) -> SpreadConstraint {
        SpreadConstraint {
            max_skew: 1,
            topology_key: key.into(),
            selector: selector(&[("foo", "")]),
            min_domains: None,
            honor_node_affinity: true,
            honor_taints: false,
        }
    }

    /// PodTopologySpread's scores of the candidates (node names), as
    /// kube-scheduler's `TestPodTopologySpreadScore` states them: each
    /// pod of `pods` (node name, count) matches the selector.
    fn spread_scores(
        nodes: &[(&str, &[(&str, &str)])],
        pods: &[(&str, usize)],
        candidates: &[&str],
        p: Pod,
    ) -> Vec<u64> {
        let mut c = cluster(nodes);
        for (node, n) in pods {
            for i in 0..*n {
                place(&mut c, pod(&format!("{node}-{i}"), &[("foo", "")]), node);
            }
        }
        let index: Vec<u32> = candidates
            .iter()
            .map(|name| c.nodes().iter().position(|n| n.name == *name).unwrap() as u32)
            .collect();
        spread(&c, &p, &index)
    }

    fn spreading(keys: &[&str]) -> Pod {
        with(pod("p", &[("foo", "")]), |c| {
            c.preferred_spread = keys.iter().map(|k| soft_spread(k)).collect()
        })
    }

    #[test]
    fn schedule_anyway_spread_prefers_domains_with_fewer_matching_pods() {
        let hosts: Vec<(&str, &[(&str, &str)])> = vec![
            ("a", &[(HOST, "a")]),
            ("b", &[(HOST, "b")]),
            ("c", &[(HOST, "c")]),
            ("d", &[(HOST, "d")]),
        ];
        assert_eq!(
            spread_scores(
                &hosts,
                &[("a", 2), ("b", 1), ("d", 3)],
                &["a", "b", "c", "d"],
                spreading(&[HOST])
            ),
            [20, 60, 100, 0]
        );
        // Pods on a node that failed the filters do not count per node.
        let hosts_xy: Vec<(&str, &[(&str, &str)])> = vec![
            ("a", &[(HOST, "a")]),
            ("b", &[(HOST, "b")]),
            ("x", &[(HOST, "x")]),
            ("y", &[(HOST, "y")]),
        ];
        let pods = [("a", 4), ("b", 2), ("x", 1), ("y", 3)];
        assert_eq!(
            spread_scores(&hosts_xy, &pods, &["a", "b", "x"], spreading(&[HOST])),
            [33, 83, 100]
        );
        // A candidate without the key scores 0 and is not a domain.
        let mut no_key = hosts_xy.clone();
        no_key[1] = ("b", &[("n", "b")]);
        assert_eq!(
            spread_scores(&no_key, &pods, &["a", "b", "x"], spreading(&[HOST])),
            [16, 0, 100]
        );
        // Per zone, counting pods on every node of a candidate's zone.
        let zoned: Vec<(&str, &[(&str, &str)])> = vec![
            ("a", &[(ZONE, "z1"), (HOST, "a")]),
            ("b", &[(ZONE, "z1"), (HOST, "b")]),
            ("x", &[(ZONE, "z2"), (HOST, "x")]),
            ("y", &[(ZONE, "z2"), (HOST, "y")]),
        ];
        assert_eq!(
            spread_scores(&zoned, &pods, &["a", "b", "x"], spreading(&[ZONE])),
            [75, 75, 100]
        );
        // Two constraints add up, each weighted by its number of domains.
        assert_eq!(
            spread_scores(
                &zoned,
                &[("a", 2), ("b", 1), ("x", 2), ("y", 4)],
                &["a", "x"],
                spreading(&[ZONE, HOST])
            ),
            [100, 63]
        );
    }

    #[test]
    fn spread_scoring_counts_only_nodes_its_inclusion_policies_admit() {
        let nodes: Vec<(&str, &[(&str, &str)])> = vec![
            ("a", &[("node", "a"), ("foo", "")]),
            ("b", &[("node", "b"), ("foo", "")]),
            ("c", &[("node", "c")]),
        ];
        let pods = [("a", 2), ("b", 1), ("c", 1)];
        let mut p = spreading(&["node"]);
        p.node_selector = [("foo".to_string(), String::new())].into();
        // Honoured (the default): c's pod does not count.
        assert_eq!(
            spread_scores(&nodes, &pods, &["a", "b", "c"], p.clone()),
            [0, 33, 100]
        );
        p.constraints.preferred_spread[0].honor_node_affinity = false;
        assert_eq!(
            spread_scores(&nodes, &pods, &["a", "b", "c"], p),
            [66, 100, 100]
        );
        // Pods in another namespace never count.
        let mut c = cluster(&nodes[..2]);
        let mut other = pod("o", &[("foo", "")]);
        other.namespace = "elsewhere".into();
        place(&mut c, other, "a");
        assert_eq!(spread(&c, &spreading(&["node"]), &[0, 1]), [100, 100]);
    }
}
