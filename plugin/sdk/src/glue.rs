//! The per-instance policy value behind the exported functions. A component
//! instance is single-threaded, so a thread-local holds it.

use std::any::Any;
use std::cell::RefCell;

use crate::Policy;
use crate::types::Changes;
use crate::view::View;

thread_local! {
    static STATE: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
    static VIEW: RefCell<View> = RefCell::new(View::default());
}

fn with_state<P: Policy, R>(f: impl FnOnce(&mut P) -> R) -> R {
    STATE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let boxed = slot.get_or_insert_with(|| {
            install_panic_logger();
            Box::new(P::default())
        });
        // Only one policy type is ever exported per component.
        let policy = boxed
            .downcast_mut::<P>()
            .expect("one policy type per component");
        f(policy)
    })
}

#[doc(hidden)]
pub fn __policy_call<P: Policy, R>(f: impl FnOnce(&P) -> R) -> R {
    with_state::<P, R>(|p| f(p))
}

/// Apply `changes` to the instance's view, then run `f` with it.
#[doc(hidden)]
pub fn __policy_view<P: Policy, R>(changes: &Changes, f: impl FnOnce(&P, &View) -> R) -> R {
    VIEW.with(|cell| {
        let mut view = cell.borrow_mut();
        view.apply(changes);
        with_state::<P, R>(|p| f(p, &view))
    })
}

/// `filter`'s verdicts as the interface returns them: the positions refused.
/// A verdict list of the wrong length is a bug in the policy, and the
/// interface cannot carry it: it traps, with the lengths in the message.
#[doc(hidden)]
pub fn __refused(verdicts: Vec<bool>, candidates: usize) -> Vec<u32> {
    assert!(
        verdicts.len() == candidates,
        "filter returned {} results for {candidates} candidates",
        verdicts.len()
    );
    verdicts
        .iter()
        .enumerate()
        .filter(|(_, pass)| !**pass)
        .map(|(i, _)| i as u32)
        .collect()
}

#[doc(hidden)]
pub fn __policy_call_mut<P: Policy, R>(f: impl FnOnce(&mut P) -> R) -> R {
    with_state::<P, R>(f)
}

/// With `panic = "abort"` a panic is a bare `unreachable` trap; log the
/// message first so the host's error can say what went wrong.
fn install_panic_logger() {
    #[cfg(target_arch = "wasm32")]
    std::panic::set_hook(Box::new(|info| {
        crate::log(crate::types::Level::Error, &format!("panic: {info}"));
    }));
}
