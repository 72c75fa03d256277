//! Teams sharing the cluster, as dragon-scheduler's configuration names
//! them: queues with the namespaces whose PodGroups belong to each.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use dragon_framework::{QueueName, QueueSpec};
use serde::Deserialize;

/// One queue (team): `dragon_framework::QueueSpec` with the namespaces
/// mapped to it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct QueueConfig {
    pub name: String,
    /// The namespaces whose PodGroups (gangs) belong to this queue.
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default = "one")]
    pub weight: f64,
    #[serde(default)]
    pub guaranteed_gpus: u32,
    #[serde(default)]
    pub borrowing_limit_gpus: Option<u32>,
    #[serde(default)]
    pub parent: Option<String>,
}

fn one() -> f64 {
    1.0
}

impl super::Config {
    /// The queues as the framework takes them, and each mapped namespace's
    /// queue.
    pub fn queue_specs(&self) -> (Vec<QueueSpec>, BTreeMap<String, QueueName>) {
        specs(&self.queues)
    }
}

fn specs(queues: &[QueueConfig]) -> (Vec<QueueSpec>, BTreeMap<String, QueueName>) {
    {
        let specs = queues
            .iter()
            .map(|q| QueueSpec {
                name: q.name.as_str().into(),
                weight: q.weight,
                guaranteed_gpus: q.guaranteed_gpus,
                borrowing_limit_gpus: q.borrowing_limit_gpus,
                parent: q.parent.as_deref().map(QueueName::from),
            })
            .collect();
        let namespaces = queues
            .iter()
            .flat_map(|q| {
                q.namespaces
                    .iter()
                    .map(|ns| (ns.clone(), q.name.as_str().into()))
            })
            .collect();
        (specs, namespaces)
    }
}

/// What the framework checks of the queues, and no namespace in two.
pub(super) fn check(queues: &[QueueConfig]) -> Result<()> {
    let (specs, _) = specs(queues);
    dragon_framework::check_queues(&specs, None).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut mapped = BTreeMap::new();
    for q in queues {
        for ns in &q.namespaces {
            if let Some(other) = mapped.insert(ns.as_str(), q.name.as_str()) {
                bail!(
                    "queues: namespace {ns} is mapped to both {other} and {}",
                    q.name
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn queues_map_namespaces_and_a_bad_list_is_refused_named() {
        let c = Config::parse(
            "policy: dragon\nqueues:\n- {name: a, namespaces: [team-a, x], guaranteedGpus: 8}\n- {name: b, namespaces: [team-b], weight: 2, borrowingLimitGpus: 4}\n",
            "c.yaml",
        )
        .unwrap();
        let (specs, namespaces) = c.queue_specs();
        assert_eq!(specs.len(), 2);
        assert_eq!(
            (specs[1].weight, specs[1].borrowing_limit_gpus),
            (2.0, Some(4))
        );
        assert_eq!(namespaces.get("x").map(QueueName::as_str), Some("a"));
        assert_eq!(namespaces.get("team-b").map(QueueName::as_str), Some("b"));
        let e = format!(
            "{:#}",
            Config::parse(
                "policy: dragon\nqueues:\n- {name: a, namespaces: [n]}\n- {name: b, namespaces: [n]}\n",
                "c.yaml"
            )
            .unwrap_err()
        );
        assert!(e.contains("namespace n is mapped to both a and b"), "{e}");
        let e = format!(
            "{:#}",
            Config::parse(
                "policy: dragon\nqueues:\n- {name: a, parent: z}\n",
                "c.yaml"
            )
            .unwrap_err()
        );
        assert!(e.contains("no queue is named `z`"), "{e}");
    }
}
