//! Choosing a pod's devices on one node, as kube-scheduler v1.37 does
//! (`structured/internal/incubating`): the pools the node reaches, in
//! (driver, pool) order with only each pool's newest complete generation;
//! claims, requests and a request's choices in order; a request's devices
//! as combinations of the candidates in order, backtracking when a later
//! request or claim cannot be met. The first solution wins.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::cel::Selector;
use super::{
    AllocatedDevice, Allocation, Attribute, ClaimEntry, Device, DeviceId, Inventory,
    MAX_DEVICES_PER_CLAIM, Mode, Published, Reach, ResourceSlice,
};
use crate::model::Node;
use crate::selector::{NODE_NAME_FIELD, NodeSelector, NodeSelectorTerm, Operator, Requirement};

/// Most device placements one node's search tries before giving up on the
/// node (kube bounds the same search by a 10 s timeout; a count keeps a
/// replay deterministic).
const MAX_STEPS: u32 = 100_000;

/// Whether a pod's claims can be met on a node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Fit {
    /// Yes, with these allocations for the claims not yet allocated, and
    /// the devices serving its GPU request when asked.
    Yes(Vec<(String, Allocation)>, Option<Allocation>),
    /// No, for this reason (kube's wording).
    No(&'static str),
}

/// Why a pod's claims cannot be tried at all: the same on every node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    #[error("could not find ResourceClaim \"{0}\"")]
    NoClaim(String),
    #[error("resource claim {claim}, request {request}: device class {class} does not exist")]
    NoClass {
        claim: String,
        request: String,
        class: String,
    },
    #[error(
        "resource claim {claim}: adding {devices} devices exceeds the claim limit of {MAX_DEVICES_PER_CLAIM}"
    )]
    TooMany { claim: String, devices: u64 },
    #[error("{0}")]
    Selector(#[from] super::SelectorError),
    #[error("{object}: {problem}")]
    Unusable { object: String, problem: String },
    #[error(
        "resource claim {claim}, request {request}: asks for all devices, but resource pool {pool} is currently being updated"
    )]
    PoolUpdating {
        claim: String,
        request: String,
        pool: String,
    },
    #[error("cannot add device {device} because a claim constraint would not be satisfied")]
    Constraint { device: DeviceId },
}

/// A device the node reaches, with where it comes from.
struct Candidate<'a> {
    published: &'a Published,
    /// Its index in the slice.
    at: usize,
    id: &'a DeviceId,
    device: &'a Device,
    slice: &'a ResourceSlice,
}

/// The pools node `node` reaches: candidates in (driver, pool, slice,
/// device) order, and whether some pool was seen incomplete or invalid.
fn gather<'a>(inv: &'a Inventory, node: &Node) -> (Vec<Candidate<'a>>, Option<String>) {
    // Newest generation of each pool among the slices the node reaches.
    let mut pools: BTreeMap<(&str, &str), (i64, Vec<&'a Published>)> = BTreeMap::new();
    for published in inv.slices_near(&node.name) {
        let slice = &published.slice;
        let reaches = match &slice.reach {
            Some(r) => r.admits(node),
            None => slice
                .devices
                .iter()
                .any(|d| d.reach.as_ref().is_some_and(|r| r.admits(node))),
        };
        if !reaches {
            continue;
        }
        let e = pools
            .entry((&slice.driver, &slice.pool))
            .or_insert((slice.generation, Vec::new()));
        if slice.generation > e.0 {
            *e = (slice.generation, Vec::new());
        }
        if slice.generation == e.0 {
            e.1.push(published);
        }
    }
    let mut out = Vec::new();
    let mut unusable = None;
    for ((driver, pool), (generation, local)) in pools {
        let want = local[0].slice.slice_count;
        if local.len() as u64 != want {
            // Slices of the pool elsewhere may complete it; a newer
            // generation anywhere makes this one obsolete.
            let all = inv.pool_slices(driver, pool);
            if all.iter().any(|s| s.generation > generation) {
                continue;
            }
            let current = all.iter().filter(|s| s.generation == generation).count();
            if current as u64 != want {
                unusable.get_or_insert_with(|| format!("{driver}/{pool}"));
                continue;
            }
        }
        let mut names = HashSet::new();
        let valid = local
            .iter()
            .flat_map(|s| &s.slice.devices)
            .all(|d| names.insert(d.name.as_str()));
        if !valid {
            unusable.get_or_insert_with(|| format!("{driver}/{pool}"));
            continue;
        }
        for published in local {
            let slice = &published.slice;
            for (at, device) in slice.devices.iter().enumerate() {
                if slice.reach.is_none() && !device.reach.as_ref().is_some_and(|r| r.admits(node)) {
                    continue;
                }
                out.push(Candidate {
                    published,
                    at,
                    id: &published.ids[at],
                    device,
                    slice,
                });
            }
        }
    }
    (out, unusable)
}

/// A request's choice, resolved: the class's and its own selectors, and
/// how many devices.
struct Want<'a> {
    /// `req` or `req/sub`.
    name: String,
    class: &'a str,
    own: &'a [Selector],
    mode: Mode,
    choice: &'a super::Choice,
}

/// Search state for one node.
struct Search<'a, 'c> {
    inv: &'a Inventory,
    claims: &'c [&'a ClaimEntry],
    /// Per claim, per request, its choices.
    wants: &'c [Vec<Vec<Want<'a>>>],
    cands: &'c [Candidate<'a>],
    picked: Vec<Vec<(String, usize)>>,
    taken: HashSet<usize>,
    /// Per claim, per constraint: the value set by the first device and
    /// how many devices hold it.
    constraints: Vec<Vec<(Option<&'a Attribute>, u32)>>,
    /// Whether candidate `i` is selectable for claim, request, choice.
    memo: HashMap<(usize, usize, usize, usize), bool>,
    steps: u32,
    pool_problem: Option<String>,
}

impl<'a> Inventory {
    /// Whether the claims named `keys`, and `gpus` devices of the GPU
    /// class (a `nvidia.com/gpu` request on a node that does not advertise
    /// it), can be met on `node`.
    ///
    /// # Errors
    /// Why they cannot be tried on any node.
    pub(crate) fn fit(
        &'a self,
        node: &'a Node,
        keys: &[String],
        gpus: u32,
    ) -> Result<Fit, DeviceError> {
        self.try_fit(node, keys, gpus, true)
    }

    /// [`Inventory::fit`] without the allocations: the filter's question,
    /// asked of every node.
    ///
    /// # Errors
    /// As [`Inventory::fit`].
    pub(crate) fn fits(
        &'a self,
        node: &'a Node,
        keys: &[String],
        gpus: u32,
    ) -> Result<Fit, DeviceError> {
        self.try_fit(node, keys, gpus, false)
    }

    fn try_fit(
        &'a self,
        node: &'a Node,
        keys: &[String],
        gpus: u32,
        allocations: bool,
    ) -> Result<Fit, DeviceError> {
        // The request kube-scheduler's extended-resource claim would make.
        let implicit = match (gpus, self.gpu_class_name()) {
            (0, _) => None,
            (n, Some(class)) => Some(ClaimEntry {
                claim: super::Claim::new(
                    "",
                    vec![super::Request::exactly(
                        super::EXTENDED_REQUEST,
                        class,
                        n,
                        &[],
                    )],
                ),
                selectors: Ok(vec![vec![Vec::new()]]),
                chosen: None,
            }),
            (_, None) => return Ok(Fit::No("Insufficient nvidia.com/gpu")),
        };
        let mut todo = Vec::new();
        let mut elsewhere = false;
        for key in keys {
            let entry = self
                .claims
                .get(key)
                .ok_or_else(|| DeviceError::NoClaim(key.clone()))?;
            if let Some(problem) = &entry.claim.unusable {
                return Err(DeviceError::Unusable {
                    object: format!("ResourceClaim {key}"),
                    problem: problem.clone(),
                });
            }
            match entry.allocation() {
                Some(a) => {
                    if a.nodes
                        .as_ref()
                        .is_some_and(|s| !s.matches(&node.name, &node.labels))
                    {
                        elsewhere = true;
                    }
                }
                None => todo.push(entry),
            }
        }
        if elsewhere {
            return Ok(Fit::No("resourceclaim not available on the node"));
        }
        todo.extend(implicit.as_ref());
        if todo.is_empty() {
            return Ok(Fit::Yes(Vec::new(), None));
        }
        let wants = self.wants(&todo)?;
        let (cands, pool_problem) = gather(self, node);
        let mut search = Search {
            inv: self,
            claims: &todo,
            constraints: todo
                .iter()
                .map(|c| vec![(None, 0); c.claim.constraints.len()])
                .collect(),
            picked: vec![Vec::new(); todo.len()],
            wants: &wants,
            cands: &cands,
            taken: HashSet::new(),
            memo: HashMap::new(),
            steps: 0,
            pool_problem,
        };
        if !search.claim(0)? {
            return Ok(Fit::No(if search.steps > MAX_STEPS {
                "timed out trying to allocate devices"
            } else {
                "cannot allocate all claims"
            }));
        }
        if !allocations {
            return Ok(Fit::Yes(Vec::new(), None));
        }
        let mut results = search.results();
        let extended = match implicit {
            Some(_) => results.pop().map(|(_, a)| a),
            None => None,
        };
        Ok(Fit::Yes(results, extended))
    }

    /// Every claim's requests with their classes' selectors, checked
    /// against the claim limit.
    fn wants(&'a self, todo: &[&'a ClaimEntry]) -> Result<Vec<Vec<Vec<Want<'a>>>>, DeviceError> {
        let mut out = Vec::new();
        for entry in todo {
            let own = entry.selectors.as_ref().map_err(|e| e.clone())?;
            let mut requests = Vec::new();
            let mut least = 0u64;
            for (ri, r) in entry.claim.requests.iter().enumerate() {
                let mut choices = Vec::new();
                let mut fewest = u64::MAX;
                for (hi, choice) in r.choices.iter().enumerate() {
                    let name = match &choice.subrequest {
                        Some(s) => format!("{}/{s}", r.name),
                        None => r.name.clone(),
                    };
                    let class =
                        self.classes
                            .get(&choice.class)
                            .ok_or_else(|| DeviceError::NoClass {
                                claim: entry.claim.key.clone(),
                                request: name.clone(),
                                class: choice.class.clone(),
                            })?;
                    if let Some(problem) = &class.class.unusable {
                        return Err(DeviceError::Unusable {
                            object: format!("DeviceClass {}", choice.class),
                            problem: problem.clone(),
                        });
                    }
                    if let Err(e) = &class.selectors {
                        return Err(e.clone().into());
                    }
                    fewest = fewest.min(match choice.mode {
                        Mode::Count(n) => u64::from(n),
                        Mode::All => 1,
                    });
                    choices.push(Want {
                        name,
                        class: &class.class.name,
                        own: &own[ri][hi],
                        mode: choice.mode,
                        choice,
                    });
                }
                least = least.saturating_add(if choices.is_empty() { 0 } else { fewest });
                requests.push(choices);
            }
            if least > MAX_DEVICES_PER_CLAIM as u64 {
                return Err(DeviceError::TooMany {
                    claim: entry.claim.key.clone(),
                    devices: least,
                });
            }
            out.push(requests);
        }
        Ok(out)
    }

    /// The slices that may reach node `name`: its own, and those reaching
    /// several nodes.
    fn slices_near(&'a self, name: &str) -> impl Iterator<Item = &'a Published> {
        let own = self.by_node.get(name).into_iter().flatten();
        own.chain(&self.shared).filter_map(|n| self.slices.get(n))
    }

    fn pool_slices(&'a self, driver: &str, pool: &str) -> Vec<&'a ResourceSlice> {
        self.slices
            .values()
            .map(|p| &p.slice)
            .filter(|s| s.driver == driver && s.pool == pool)
            .collect()
    }
}

impl<'a> Search<'a, '_> {
    fn claim(&mut self, ci: usize) -> Result<bool, DeviceError> {
        if ci == self.claims.len() {
            return Ok(true);
        }
        self.request(ci, 0)
    }

    fn request(&mut self, ci: usize, ri: usize) -> Result<bool, DeviceError> {
        if ri == self.wants[ci].len() {
            return self.claim(ci + 1);
        }
        let wants = self.wants;
        for (hi, want) in wants[ci][ri].iter().enumerate() {
            let at = (ci, ri, hi);
            let ok = match want.mode {
                Mode::Count(n) => self.count(want, at, n, 0)?,
                Mode::All => self.all(want, at)?,
            };
            if ok {
                return Ok(true);
            }
            if self.steps > MAX_STEPS {
                return Ok(false);
            }
        }
        Ok(false)
    }

    /// `left` more devices for `want`, from candidate `from` on.
    fn count(
        &mut self,
        want: &Want<'a>,
        at: (usize, usize, usize),
        left: u32,
        from: usize,
    ) -> Result<bool, DeviceError> {
        let (ci, ri, _) = at;
        if left == 0 {
            return self.request(ci, ri + 1);
        }
        if self.picked[ci].len() + left as usize > MAX_DEVICES_PER_CLAIM {
            return Ok(false);
        }
        for i in from..self.cands.len() {
            if !self.free(i) || !self.selectable(i, want, at)? {
                continue;
            }
            if self.add(i, want, ci, false)? {
                if self.count(want, at, left - 1, i + 1)? {
                    return Ok(true);
                }
                self.undo(i, ci);
            }
            if self.steps > MAX_STEPS {
                return Ok(false);
            }
        }
        Ok(false)
    }

    /// Every matching device the node reaches, for `want`.
    fn all(&mut self, want: &Want<'a>, at: (usize, usize, usize)) -> Result<bool, DeviceError> {
        let (ci, ri, _) = at;
        if let Some(pool) = &self.pool_problem {
            return Err(DeviceError::PoolUpdating {
                claim: self.claims[ci].claim.key.clone(),
                request: want.name.clone(),
                pool: pool.clone(),
            });
        }
        let mut list = Vec::new();
        for i in 0..self.cands.len() {
            if self.selectable(i, want, at)? {
                list.push(i);
            }
        }
        if list.is_empty() || self.picked[ci].len() + list.len() > MAX_DEVICES_PER_CLAIM {
            return Ok(false);
        }
        let mut added = Vec::new();
        let mut ok = true;
        for &i in &list {
            if self.free(i) && self.add(i, want, ci, true)? {
                added.push(i);
            } else {
                ok = false;
                break;
            }
        }
        if ok && self.request(ci, ri + 1)? {
            return Ok(true);
        }
        for i in added.into_iter().rev() {
            self.undo(i, ci);
        }
        Ok(false)
    }

    fn free(&self, i: usize) -> bool {
        !self.taken.contains(&i) && !self.inv.in_use.contains_key(self.cands[i].id)
    }

    fn selectable(
        &mut self,
        i: usize,
        want: &Want<'a>,
        at: (usize, usize, usize),
    ) -> Result<bool, DeviceError> {
        let key = (i, at.0, at.1, at.2);
        if let Some(&v) = self.memo.get(&key) {
            return Ok(v);
        }
        let c = &self.cands[i];
        let by_class = c
            .published
            .classes
            .get(want.class)
            .and_then(|v| v.get(c.at))
            .cloned()
            .unwrap_or(Ok(false))?;
        let mut ok = by_class;
        if ok {
            let bound = &c.published.bound[c.at];
            let devices = c.published.ids.len();
            for s in want.own {
                let verdict = c
                    .published
                    .verdicts
                    .get(s, c.at, devices, || s.matches_bound(c.id, bound))?;
                if !verdict {
                    ok = false;
                    break;
                }
            }
        }
        self.memo.insert(key, ok);
        Ok(ok)
    }

    /// Takes candidate `i` for `want` if its taints and the claim's
    /// constraints allow; `must` makes a constraint violation an error
    /// (a request for all devices cannot leave one out).
    fn add(
        &mut self,
        i: usize,
        want: &Want<'a>,
        ci: usize,
        must: bool,
    ) -> Result<bool, DeviceError> {
        self.steps += 1;
        let c = &self.cands[i];
        let untolerated = c
            .device
            .taints
            .iter()
            .any(|t| t.repels() && !want.choice.tolerations.iter().any(|tol| tol.tolerates(t)));
        if untolerated {
            return Ok(false);
        }
        let claim = &self.claims[ci].claim;
        let applying = || {
            claim
                .constraints
                .iter()
                .enumerate()
                .filter(|(_, m)| applies(&m.requests, &want.name))
        };
        let fits = applying().all(|(k, m)| {
            match (attribute(c, &m.attribute), self.constraints[ci][k].0) {
                (None, _) => false,
                (Some(_), None) => true,
                (Some(v), Some(set)) => v == set,
            }
        });
        if !fits {
            if must {
                return Err(DeviceError::Constraint {
                    device: c.id.clone(),
                });
            }
            return Ok(false);
        }
        let set: Vec<(usize, Option<&'a Attribute>)> = applying()
            .map(|(k, m)| (k, attribute(c, &m.attribute)))
            .collect();
        for (k, value) in set {
            let e = &mut self.constraints[ci][k];
            e.0 = value;
            e.1 += 1;
        }
        self.taken.insert(i);
        self.picked[ci].push((want.name.clone(), i));
        Ok(true)
    }

    fn undo(&mut self, i: usize, ci: usize) {
        let Some((name, _)) = self.picked[ci].pop() else {
            return;
        };
        self.taken.remove(&i);
        for (k, m) in self.claims[ci].claim.constraints.iter().enumerate() {
            if applies(&m.requests, &name) {
                let e = &mut self.constraints[ci][k];
                e.1 = e.1.saturating_sub(1);
                if e.1 == 0 {
                    e.0 = None;
                }
            }
        }
    }

    /// One allocation per claim, in claim order, with the nodes that reach
    /// all its devices.
    fn results(&self) -> Vec<(String, Allocation)> {
        self.claims
            .iter()
            .zip(&self.picked)
            .map(|(entry, picked)| {
                let devices = picked
                    .iter()
                    .map(|(request, i)| AllocatedDevice {
                        request: request.clone(),
                        device: self.cands[*i].id.clone(),
                    })
                    .collect();
                let reaches = picked.iter().map(|(_, i)| {
                    let c = &self.cands[*i];
                    c.slice.reach.as_ref().or(c.device.reach.as_ref())
                });
                (
                    entry.claim.key.clone(),
                    Allocation {
                        devices,
                        nodes: node_selector(reaches),
                    },
                )
            })
            .collect()
    }
}

/// Whether a constraint naming `requests` (all when empty) applies to a
/// device chosen for `name` (`req` or `req/sub`; naming `req` covers its
/// subrequests).
fn applies(requests: &[String], name: &str) -> bool {
    let request = name.split('/').next().unwrap_or(name);
    requests.is_empty() || requests.iter().any(|r| r == request || r == name)
}

/// A device's attribute by qualified name; a name in the driver's domain
/// also matches the attribute written without it.
fn attribute<'a>(c: &Candidate<'a>, name: &str) -> Option<&'a Attribute> {
    c.device.attributes.get(name).or_else(|| {
        let (domain, id) = name.split_once('/')?;
        (domain == c.id.driver)
            .then(|| c.device.attributes.get(id))
            .flatten()
    })
}

/// The nodes that reach every device of an allocation, as kube writes
/// them: the first local device's node, else the selectors' single terms
/// merged, else every node.
fn node_selector<'r>(reaches: impl Iterator<Item = Option<&'r Reach>>) -> Option<NodeSelector> {
    let mut term = NodeSelectorTerm::default();
    for reach in reaches.flatten() {
        match reach {
            Reach::Node(n) => {
                return Some(NodeSelector {
                    terms: vec![NodeSelectorTerm {
                        match_expressions: Vec::new(),
                        match_fields: vec![Requirement {
                            key: NODE_NAME_FIELD.into(),
                            operator: Operator::In,
                            values: vec![n.clone()],
                        }],
                    }],
                });
            }
            Reach::Nodes(s) => {
                if let [t] = s.terms.as_slice() {
                    for r in &t.match_expressions {
                        if !term.match_expressions.contains(r) {
                            term.match_expressions.push(r.clone());
                        }
                    }
                    for r in &t.match_fields {
                        if !term.match_fields.contains(r) {
                            term.match_fields.push(r.clone());
                        }
                    }
                }
            }
            Reach::All => {}
        }
    }
    (!term.match_expressions.is_empty() || !term.match_fields.is_empty())
        .then(|| NodeSelector { terms: vec![term] })
}
