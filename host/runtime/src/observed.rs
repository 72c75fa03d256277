//! A policy seen through an observer: every hook call goes through
//! [`Observer::call`], which may time it, count it or log it, and the
//! answer is the policy's own. One forwarding wrapper serves every driver
//! (the shim's metrics, tests that count calls).

use crate::error::CallError;
use crate::hooks::{Hooks, PolicyInfo};
use crate::view::ClusterView;
use crate::wit;

/// Watches hook calls.
pub trait Observer {
    /// Run `call`, the policy's `hook`, and return its answer.
    fn call<R>(
        &self,
        hook: wit::Hook,
        call: impl FnOnce() -> Result<R, CallError>,
    ) -> Result<R, CallError>;
}

/// `inner` with each hook call passed through `observer`.
pub struct Observed<'a, O> {
    pub inner: &'a dyn Hooks,
    pub observer: O,
}

impl<O: Observer> Hooks for Observed<'_, O> {
    fn info(&self) -> &PolicyInfo {
        self.inner.info()
    }
    fn begin_round(&self) {
        self.inner.begin_round()
    }
    fn queue_order(
        &self,
        now_ms: u64,
        units: &[wit::Queued],
        view: &dyn ClusterView,
    ) -> Result<Vec<u32>, CallError> {
        self.observer.call(wit::Hook::QueueOrder, || {
            self.inner.queue_order(now_ms, units, view)
        })
    }
    fn pre_filter(
        &self,
        now_ms: u64,
        unit: &wit::Unit,
        nodes: &wit::Capacity,
        view: &dyn ClusterView,
    ) -> Result<wit::PreFilterResult, CallError> {
        self.observer.call(wit::Hook::PreFilter, || {
            self.inner.pre_filter(now_ms, unit, nodes, view)
        })
    }
    fn filter(
        &self,
        pod: &wit::Placement,
        nodes: &wit::Candidates,
        view: &dyn ClusterView,
    ) -> Result<Vec<bool>, CallError> {
        self.observer
            .call(wit::Hook::Filter, || self.inner.filter(pod, nodes, view))
    }
    fn score(
        &self,
        pod: &wit::Placement,
        nodes: &wit::Candidates,
        view: &dyn ClusterView,
    ) -> Result<Vec<u32>, CallError> {
        self.observer
            .call(wit::Hook::Score, || self.inner.score(pod, nodes, view))
    }
    fn permit(&self, now_ms: u64, gang: &wit::GangState) -> Result<wit::PermitResult, CallError> {
        self.observer
            .call(wit::Hook::Permit, || self.inner.permit(now_ms, gang))
    }
    fn scale(
        &self,
        input: &wit::ScaleInput,
        view: &dyn ClusterView,
    ) -> Result<Vec<wit::ScaleDecision>, CallError> {
        self.observer
            .call(wit::Hook::Scale, || self.inner.scale(input, view))
    }
}
