//! Choosing a pod's devices on one node, as kube-scheduler v1.37 does
//! (`structured/internal/incubating`): the pools the node reaches, in
//! (driver, pool) order with only each pool's newest complete generation;
//! claims, requests and a request's choices in order; a request's devices
//! as combinations of the candidates in order, backtracking when a later
//! request or claim cannot be met. The first solution wins.

use std::collections::{BTreeMap, HashMap};

use super::cel::{Quantity, Selector};
use super::counters::Counters;
use super::{
    Allocation, Attribute, AttributeRule, ClaimEntry, DeviceId, Inventory, MAX_DEVICES_PER_CLAIM,
    Mode, Published, ResourceSlice,
};
use crate::model::Node;

mod pools;
mod results;

use pools::{Candidate, gather};

/// Most device placements one node's search tries before giving up on the
/// node (kube bounds the same search by a 10 s timeout; a count keeps a
/// replay deterministic).
const MAX_STEPS: u32 = 100_000;

/// Whether a pod's claims can be met on a node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Fit {
    /// Yes, with these allocations for the claims not yet allocated, and
    /// the devices serving its extended resources when asked (one request
    /// per resource, named by it).
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
    #[error("resource claim {claim}, device {device}: {source}")]
    Capacity {
        claim: String,
        device: Box<DeviceId>,
        source: super::Unrepresentable,
    },
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

/// A device taken for a request, and what taking it reserved.
struct Pick {
    /// `req` or `req/sub`.
    request: String,
    at: usize,
    admin_access: bool,
    /// Its pool's counters were reserved for it.
    counted: bool,
    /// What it takes of a device others share, when it is a share.
    share: Option<BTreeMap<String, Quantity>>,
}

/// Search state for one node.
struct Search<'a, 'c> {
    inv: &'a Inventory,
    claims: &'c [&'a ClaimEntry],
    /// Per claim, per request, its choices.
    wants: &'c [Vec<Vec<Want<'a>>>],
    cands: &'c [Candidate<'a>],
    picked: Vec<Vec<Pick>>,
    /// Per claim, per request: the choice being tried (the one met, once
    /// the search succeeds).
    selected: Vec<Vec<usize>>,
    /// Candidates taken whole, by the claims taking them (several only
    /// with admin access).
    taken: HashMap<usize, Vec<usize>>,
    /// What this search's shares take of each shared candidate.
    sharing: HashMap<usize, BTreeMap<String, u64>>,
    counters: Vec<Option<Counters>>,
    /// Per claim, per constraint: the values of the devices it holds.
    constraints: Vec<Vec<Vec<&'a Attribute>>>,
    /// Whether candidate `i` is selectable for claim, request, choice.
    memo: HashMap<(usize, usize, usize, usize), bool>,
    steps: u32,
    pool_problem: Option<String>,
}

impl<'a> Inventory {
    /// Whether the claims named `keys`, and the extended resources
    /// `served` by devices on a node that does not advertise them, can be
    /// met on `node`.
    ///
    /// # Errors
    /// Why they cannot be tried on any node.
    pub(crate) fn fit(
        &'a self,
        node: &'a Node,
        keys: &[String],
        served: &[super::Served<'_>],
    ) -> Result<Fit, DeviceError> {
        self.try_fit(node, keys, served, true)
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
        served: &[super::Served<'_>],
    ) -> Result<Fit, DeviceError> {
        self.try_fit(node, keys, served, false)
    }

    fn try_fit(
        &'a self,
        node: &'a Node,
        keys: &[String],
        served: &[super::Served<'_>],
        allocations: bool,
    ) -> Result<Fit, DeviceError> {
        // The requests of the claim kube-scheduler makes for extended
        // resources, one per resource.
        let implicit = (!served.is_empty()).then(|| ClaimEntry {
            claim: super::Claim::new(
                "",
                served
                    .iter()
                    .map(|s| super::Request::exactly(s.resource, s.class, s.count, &[]))
                    .collect(),
            ),
            selectors: Ok(served.iter().map(|_| vec![Vec::new()]).collect()),
            chosen: None,
        });
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
        let gathered = gather(self, node);
        let mut search = Search {
            inv: self,
            claims: &todo,
            constraints: todo
                .iter()
                .map(|c| vec![Vec::new(); c.claim.constraints.len()])
                .collect(),
            picked: todo.iter().map(|_| Vec::new()).collect(),
            selected: wants.iter().map(|r| vec![0; r.len()]).collect(),
            wants: &wants,
            cands: &gathered.cands,
            taken: HashMap::new(),
            sharing: HashMap::new(),
            counters: gathered.counters,
            memo: HashMap::new(),
            steps: 0,
            pool_problem: gathered.problem,
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
        let mut results = search.results(&node.name);
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
            self.selected[ci][ri] = hi;
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
            if !self.free(i, ci, want) || !self.selectable(i, want, at)? {
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
        // The devices that could serve the request on their own: selected,
        // and with the capacity it asks (kube leaves the others out).
        let mut list = Vec::new();
        for i in 0..self.cands.len() {
            if self.selectable(i, want, at)? && self.could_hold(i, want, ci)? {
                list.push(i);
            }
        }
        if list.is_empty() || self.picked[ci].len() + list.len() > MAX_DEVICES_PER_CLAIM {
            return Ok(false);
        }
        let mut added = Vec::new();
        let mut ok = true;
        for &i in &list {
            if self.free(i, ci, want) && self.add(i, want, ci, true)? {
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

    /// Whether candidate `i` has, unshared, the capacity `want` asks.
    fn could_hold(&self, i: usize, want: &Want<'a>, ci: usize) -> Result<bool, DeviceError> {
        let c = &self.cands[i];
        super::capacity::take(c.device, &want.choice.capacity, |_| 0)
            .map(|t| t.is_some())
            .map_err(|source| DeviceError::Capacity {
                claim: self.claims[ci].claim.key.clone(),
                device: Box::new(c.id.clone()),
                source,
            })
    }

    /// Whether candidate `i` may be given to claim `ci` for `want`: a
    /// device held or taken whole is given again only with admin access,
    /// and never twice to one claim.
    fn free(&self, i: usize, ci: usize, want: &Want<'a>) -> bool {
        let taken = self.taken.get(&i);
        if want.choice.admin_access {
            return !taken.is_some_and(|claims| claims.contains(&ci));
        }
        taken.is_none() && !self.inv.in_use.contains_key(self.cands[i].id)
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

    /// Takes candidate `i` for `want` if its pool's counters, its taints,
    /// the claim's constraints and its capacity allow, in kube's order;
    /// `must` makes a constraint violation an error (a request for all
    /// devices cannot leave one out).
    fn add(
        &mut self,
        i: usize,
        want: &Want<'a>,
        ci: usize,
        must: bool,
    ) -> Result<bool, DeviceError> {
        self.steps += 1;
        let c = &self.cands[i];
        let claim = &self.claims[ci].claim;
        // Capacity first, as kube checks it: what the request takes of the
        // device beside its other shares (and an amount that cannot be
        // rounded stops the search).
        let sharing = self.sharing.get(&i);
        let Some(taken) = super::capacity::take(c.device, &want.choice.capacity, |name| {
            let here = sharing.and_then(|m| m.get(name)).copied().unwrap_or(0);
            self.inv.shared_use(c.id, name).saturating_add(here)
        })
        .map_err(|source| DeviceError::Capacity {
            claim: claim.key.clone(),
            device: Box::new(c.id.clone()),
            source,
        })?
        else {
            return Ok(false);
        };
        // A further share of a shared device does not take its counters
        // again.
        let shared_already = c.device.shared
            && (self.inv.shares.contains_key(c.id) || self.sharing.contains_key(&i));
        let counted = !shared_already && !c.device.consumes.is_empty();
        if counted {
            let Some(pool) = self.counters[c.pool].as_mut() else {
                return Ok(false);
            };
            if !pool.reserve(c.device) {
                return Ok(false);
            }
        }
        let give_back = |s: &mut Self| {
            if counted && let Some(pool) = s.counters[s.cands[i].pool].as_mut() {
                pool.restore(s.cands[i].device);
            }
        };
        let untolerated = c
            .device
            .taints
            .iter()
            .chain(self.inv.rule_taints(c.id))
            .any(|t| t.repels() && !want.choice.tolerations.iter().any(|tol| tol.tolerates(t)));
        if untolerated {
            give_back(self);
            return Ok(false);
        }
        let fits = claim
            .constraints
            .iter()
            .enumerate()
            .filter(|(_, k)| applies(&k.requests, &want.name))
            .all(|(k, m)| {
                let held = &self.constraints[ci][k];
                match (attribute(c, &m.attribute), m.rule) {
                    (None, _) => false,
                    (Some(v), AttributeRule::Match) => held.first().is_none_or(|set| *set == v),
                    (Some(v), AttributeRule::Distinct) => !held.contains(&v),
                }
            });
        if !fits {
            give_back(self);
            if must {
                return Err(DeviceError::Constraint {
                    device: c.id.clone(),
                });
            }
            return Ok(false);
        }
        for (k, m) in claim.constraints.iter().enumerate() {
            if applies(&m.requests, &want.name)
                && let Some(v) = attribute(c, &m.attribute)
            {
                self.constraints[ci][k].push(v);
            }
        }
        let share = if c.device.shared {
            let here = self.sharing.entry(i).or_default();
            for (name, q) in &taken {
                let sum = here.entry(name.clone()).or_insert(0);
                *sum = sum.saturating_add(q.0);
            }
            Some(taken)
        } else {
            self.taken.entry(i).or_default().push(ci);
            None
        };
        self.picked[ci].push(Pick {
            request: want.name.clone(),
            at: i,
            admin_access: want.choice.admin_access,
            counted,
            share,
        });
        Ok(true)
    }

    fn undo(&mut self, i: usize, ci: usize) {
        let Some(pick) = self.picked[ci].pop() else {
            return;
        };
        match &pick.share {
            Some(taken) => {
                if let Some(here) = self.sharing.get_mut(&i) {
                    for (name, q) in taken {
                        if let Some(sum) = here.get_mut(name) {
                            *sum = sum.saturating_sub(q.0);
                        }
                    }
                }
                // The last share of this search leaves the device unshared
                // again, so the next one takes its counters.
                let last = self
                    .picked
                    .iter()
                    .flatten()
                    .all(|p| p.at != i || p.share.is_none());
                if last {
                    self.sharing.remove(&i);
                }
            }
            None => {
                if let Some(claims) = self.taken.get_mut(&i) {
                    claims.pop();
                    if claims.is_empty() {
                        self.taken.remove(&i);
                    }
                }
            }
        }
        if pick.counted
            && let Some(pool) = self.counters[self.cands[i].pool].as_mut()
        {
            pool.restore(self.cands[i].device);
        }
        for (k, m) in self.claims[ci].claim.constraints.iter().enumerate() {
            if applies(&m.requests, &pick.request)
                && attribute(&self.cands[i], &m.attribute).is_some()
            {
                self.constraints[ci][k].pop();
            }
        }
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
