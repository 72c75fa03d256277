//! Topology levels: node labels that name ever narrower domains (a zone,
//! a spine block, a rack, an NVLink domain, a node), each node's domain at
//! every level interned as a small id, and the constraint a gang puts on
//! them.
//!
//! A gang's constraint names a level by its label key, any node label key
//! as in kube-scheduler: the configured levels form the hierarchy a
//! preferred constraint widens through (and that policies see); a key
//! outside it is tracked as a level of its own, widening to anywhere.
//! - required: every pod of the gang in one domain of that level;
//! - preferred: one domain of that level if any holds the gang, else one
//!   domain of the next wider level, and so on, else anywhere.

use std::collections::{BTreeMap, HashMap};

use crate::model::Node;
pub use crate::model::{TopologyConstraint, TopologyMode};

/// The level every list ends with: one node is one domain.
pub const HOSTNAME_LEVEL: &str = "kubernetes.io/hostname";

/// The levels used when none are configured, widest first: the labels
/// clusters already carry (NVIDIA Topograph's network tiers, the GPU
/// operator's NVLink clique, the well-known zone) and Dragon's rack.
pub const DEFAULT_LEVELS: [&str; 8] = [
    "topology.kubernetes.io/zone",
    "network.topology.nvidia.com/datacenter",
    "network.topology.nvidia.com/spine",
    "network.topology.nvidia.com/block",
    "dragon.dev/rack",
    "network.topology.nvidia.com/accelerator",
    "nvidia.com/gpu.clique",
    HOSTNAME_LEVEL,
];

/// At most this many levels (each costs a word per node).
pub const MAX_LEVELS: usize = 16;

/// At most this many label keys outside the levels tracked for gangs'
/// constraints (each costs a word per node, and none is dropped).
pub const MAX_OTHER_KEYS: usize = 64;

/// One domain: a level and the id of its label value there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Domain {
    pub(crate) level: usize,
    pub(crate) id: u32,
}

/// Why a list of levels cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LevelsError {
    #[error("topology level {0:?} is listed twice")]
    Duplicate(String),
    #[error("a topology level is an empty label key")]
    Empty,
    #[error("{HOSTNAME_LEVEL} must be the last topology level (it is at {0} of {1})")]
    HostnameNotLast(usize, usize),
    #[error("{0} topology levels; at most {MAX_LEVELS}")]
    TooMany(usize),
    #[error(
        "topology key {0} is not a configured level, and {MAX_OTHER_KEYS} other keys are tracked already (list it in topologyLevels)"
    )]
    TooManyOtherKeys(String),
}

/// Whether `keys` can be used as topology levels (see
/// `Cluster::set_topology_levels`).
///
/// # Errors
/// Why not.
pub fn check_levels(keys: &[String]) -> Result<(), LevelsError> {
    Domains::new(keys, &[]).map(|_| ())
}

/// The configured levels, widest first, [`HOSTNAME_LEVEL`] last, then the
/// other keys gangs' constraints name, and each node's domain at each.
#[derive(Debug, Clone)]
pub(crate) struct Domains {
    /// The configured levels (the first `hierarchy`), then the other keys.
    levels: Vec<String>,
    hierarchy: usize,
    /// Per level: value → id (ids from 1; 0 is "no label").
    ids: Vec<HashMap<String, u32>>,
    /// Per level: id - 1 → value.
    names: Vec<Vec<String>>,
    /// Per level, per node index: its domain's id (0: no label).
    of_node: Vec<Vec<u32>>,
}

impl Default for Domains {
    fn default() -> Domains {
        Domains::empty(DEFAULT_LEVELS.iter().map(|s| s.to_string()).collect())
    }
}

impl Domains {
    fn empty(levels: Vec<String>) -> Domains {
        let n = levels.len();
        Domains {
            levels,
            hierarchy: n,
            ids: vec![HashMap::new(); n],
            names: vec![Vec::new(); n],
            of_node: vec![Vec::new(); n],
        }
    }

    /// Levels from `keys` (widest first), [`HOSTNAME_LEVEL`] added last
    /// when missing, with every node of `nodes` placed in its domains.
    pub(crate) fn new(keys: &[String], nodes: &[Node]) -> Result<Domains, LevelsError> {
        let mut levels: Vec<String> = Vec::with_capacity(keys.len() + 1);
        for (i, k) in keys.iter().enumerate() {
            if k.is_empty() {
                return Err(LevelsError::Empty);
            }
            if levels.contains(k) {
                return Err(LevelsError::Duplicate(k.clone()));
            }
            if k == HOSTNAME_LEVEL && i + 1 != keys.len() {
                return Err(LevelsError::HostnameNotLast(i + 1, keys.len()));
            }
            levels.push(k.clone());
        }
        if levels.last().map(String::as_str) != Some(HOSTNAME_LEVEL) {
            levels.push(HOSTNAME_LEVEL.to_string());
        }
        if levels.len() > MAX_LEVELS {
            return Err(LevelsError::TooMany(levels.len()));
        }
        let mut d = Domains::empty(levels);
        for (i, node) in nodes.iter().enumerate() {
            d.set_node(i, node);
        }
        Ok(d)
    }

    /// The configured levels, widest first.
    pub(crate) fn levels(&self) -> &[String] {
        &self.levels[..self.hierarchy]
    }

    /// The label key of `level` (a configured level or another key).
    pub(crate) fn key(&self, level: usize) -> &str {
        &self.levels[level]
    }

    /// Whether `level` is a configured one: a preferred constraint on it
    /// widens through the wider configured levels.
    pub(crate) fn in_hierarchy(&self, level: usize) -> bool {
        level < self.hierarchy
    }

    /// The position of level `key`, configured or tracked.
    pub(crate) fn level(&self, key: &str) -> Option<usize> {
        self.levels.iter().position(|l| l == key)
    }

    /// Track node label `key` as a level of its own (a constraint names
    /// it); its position.
    ///
    /// # Errors
    /// [`MAX_OTHER_KEYS`] other keys are tracked already.
    pub(crate) fn track(&mut self, key: &str, nodes: &[Node]) -> Result<usize, LevelsError> {
        if let Some(l) = self.level(key) {
            return Ok(l);
        }
        if self.levels.len() - self.hierarchy >= MAX_OTHER_KEYS {
            return Err(LevelsError::TooManyOtherKeys(key.to_string()));
        }
        self.levels.push(key.to_string());
        self.ids.push(HashMap::new());
        self.names.push(Vec::new());
        self.of_node.push(Vec::new());
        let l = self.levels.len() - 1;
        for (i, node) in nodes.iter().enumerate() {
            self.set_level(l, i, node);
        }
        Ok(l)
    }

    /// Node `i` (new or changed) is in the domains its labels name; the
    /// hostname level falls back to the node's name.
    pub(crate) fn set_node(&mut self, i: usize, node: &Node) {
        for l in 0..self.levels.len() {
            self.set_level(l, i, node);
        }
    }

    /// Node `i`'s domain at `l`.
    fn set_level(&mut self, l: usize, i: usize, node: &Node) {
        let value = node
            .labels
            .get(&self.levels[l])
            .map(String::as_str)
            .or((l + 1 == self.hierarchy).then_some(node.name.as_str()));
        let id = match value {
            None => 0,
            Some(v) => match self.ids[l].get(v) {
                Some(&id) => id,
                None => {
                    self.names[l].push(v.to_string());
                    let id = self.names[l].len() as u32;
                    self.ids[l].insert(v.to_string(), id);
                    id
                }
            },
        };
        let col = &mut self.of_node[l];
        if col.len() <= i {
            col.resize(i + 1, 0);
        }
        col[i] = id;
    }

    /// Node `i`'s domain at `level` (0: it carries no label for it).
    pub(crate) fn of(&self, level: usize, i: usize) -> u32 {
        self.of_node
            .get(level)
            .and_then(|column| column.get(i))
            .copied()
            .unwrap_or(0)
    }

    /// The label value of domain `id` at `level`.
    pub(crate) fn name(&self, level: usize, id: u32) -> &str {
        self.names[level]
            .get((id as usize).wrapping_sub(1))
            .map_or("", String::as_str)
    }

    /// `domain` as users read it: `key=value`.
    pub(crate) fn show(&self, domain: Domain) -> String {
        format!(
            "{}={}",
            self.levels[domain.level],
            self.name(domain.level, domain.id)
        )
    }

    /// The nodes of each domain at `level` among `nodes` (ascending node
    /// indices in, ascending out), and how many carry no label for it.
    pub(crate) fn group(&self, level: usize, nodes: &[u32]) -> (BTreeMap<u32, Vec<u32>>, usize) {
        let mut out: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        let mut unlabelled = 0;
        for &n in nodes {
            match self.of(level, n as usize) {
                0 => unlabelled += 1,
                id => out.entry(id).or_default().push(n),
            }
        }
        (out, unlabelled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Resources;

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        let mut n = Node::new(name, Resources::default());
        for (k, v) in labels {
            n.labels.insert(k.to_string(), v.to_string());
        }
        n
    }

    #[test]
    fn levels_end_with_the_hostname_and_reject_duplicates_and_a_misplaced_hostname() {
        let d = Domains::new(&["rack".into()], &[]).unwrap();
        assert_eq!(d.levels(), ["rack", HOSTNAME_LEVEL]);
        assert_eq!(
            Domains::new(&["rack".into(), "rack".into()], &[]).unwrap_err(),
            LevelsError::Duplicate("rack".into())
        );
        assert_eq!(
            Domains::new(&[HOSTNAME_LEVEL.into(), "rack".into()], &[]).unwrap_err(),
            LevelsError::HostnameNotLast(1, 2)
        );
        assert_eq!(
            Domains::new(&[String::new()], &[]).unwrap_err(),
            LevelsError::Empty
        );
        let many: Vec<String> = (0..MAX_LEVELS).map(|i| format!("l{i}")).collect();
        assert_eq!(
            Domains::new(&many, &[]).unwrap_err(),
            LevelsError::TooMany(MAX_LEVELS + 1)
        );
    }

    #[test]
    fn nodes_are_grouped_by_their_label_and_the_hostname_falls_back_to_the_name() {
        let nodes = [
            node("a", &[("rack", "r1")]),
            node("b", &[("rack", "r2")]),
            node("c", &[("rack", "r1")]),
            node("d", &[]),
        ];
        let d = Domains::new(&["rack".into()], &nodes).unwrap();
        let (groups, unlabelled) = d.group(0, &[0, 1, 2, 3]);
        assert_eq!(unlabelled, 1);
        let named: Vec<(&str, Vec<u32>)> = groups
            .iter()
            .map(|(&id, n)| (d.name(0, id), n.clone()))
            .collect();
        assert_eq!(named, [("r1", vec![0, 2]), ("r2", vec![1])]);
        assert_eq!(d.name(1, d.of(1, 3)), "d");
        assert_eq!(d.level(HOSTNAME_LEVEL), Some(1));
        assert_eq!(d.level("zone"), None);
    }

    #[test]
    fn a_key_outside_the_levels_is_tracked_apart_from_them_up_to_a_bound() {
        let nodes = [
            node("a", &[("rack", "r1"), ("pod", "p1")]),
            node("b", &[("rack", "r2"), ("pod", "p1")]),
            node("c", &[("rack", "r1")]),
        ];
        let mut d = Domains::new(&["rack".into()], &nodes).unwrap();
        let pod = d.track("pod", &nodes).unwrap();
        assert_eq!(d.track("pod", &nodes), Ok(pod), "tracked once");
        // Not a level policies see, nor one a preference widens through.
        assert_eq!(d.levels(), ["rack", HOSTNAME_LEVEL]);
        assert!(!d.in_hierarchy(pod) && d.in_hierarchy(0));
        let (groups, unlabelled) = d.group(pod, &[0, 1, 2]);
        assert_eq!(unlabelled, 1);
        assert_eq!(groups.values().collect::<Vec<_>>(), [&vec![0, 1]]);
        // A node added later is placed at the tracked key too; the hostname
        // level still falls back to the name.
        d.set_node(3, &node("d", &[("pod", "p2")]));
        assert_eq!(d.name(pod, d.of(pod, 3)), "p2");
        assert_eq!(d.name(1, d.of(1, 3)), "d");
        for k in 1..MAX_OTHER_KEYS {
            d.track(&format!("k{k}"), &nodes).unwrap();
        }
        assert_eq!(
            d.track("one-more", &nodes),
            Err(LevelsError::TooManyOtherKeys("one-more".into()))
        );
    }
}
