//! The per-instance policy value behind the exported functions. A component
//! instance is single-threaded, so a thread-local holds it.

use std::any::Any;
use std::cell::RefCell;

use crate::Policy;

thread_local! {
    static STATE: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
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
