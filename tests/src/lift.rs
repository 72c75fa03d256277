//! Field-for-field conversion from the framework's shapes (interface 0.1's
//! records) to the SDK's (0.2's), for the shapes both versions share, and
//! back for the answers. The native adapter uses it so that "native" in a
//! benchmark costs what native code costs, a copy of the inputs, not a serde
//! round trip. The records 0.2 extends (job history, candidates as indices)
//! are built by the adapter with the cluster at hand.

use dragon_policy_sdk::types as sdk;
use dragon_runtime::wit;

/// Convert into the same-shaped type of the other side.
pub trait Lift<T> {
    fn lift(&self) -> T;
}

macro_rules! same {
    ($($t:ty),*) => {$(
        impl Lift<$t> for $t {
            #[inline]
            fn lift(&self) -> $t {
                self.clone()
            }
        }
    )*};
}
same!(u64, u32, i32, bool, String);

impl<A: Lift<B>, B> Lift<Vec<B>> for Vec<A> {
    #[inline]
    fn lift(&self) -> Vec<B> {
        self.iter().map(Lift::lift).collect()
    }
}

/// Both directions for a record, field by field.
macro_rules! record {
    ($name:ident { $($field:ident),* $(,)? }) => {
        impl Lift<sdk::$name> for wit::$name {
            fn lift(&self) -> sdk::$name {
                sdk::$name { $($field: self.$field.lift()),* }
            }
        }
        impl Lift<wit::$name> for sdk::$name {
            fn lift(&self) -> wit::$name {
                wit::$name { $($field: self.$field.lift()),* }
            }
        }
    };
}

/// Both directions for a C-like enum.
macro_rules! enumeration {
    ($name:ident { $($case:ident),* $(,)? }) => {
        impl Lift<sdk::$name> for wit::$name {
            fn lift(&self) -> sdk::$name {
                match self { $(wit::$name::$case => sdk::$name::$case),* }
            }
        }
        impl Lift<wit::$name> for sdk::$name {
            fn lift(&self) -> wit::$name {
                match self { $(sdk::$name::$case => wit::$name::$case),* }
            }
        }
    };
}

enumeration!(Role { Ps, Worker, Other });
enumeration!(Hook {
    QueueOrder,
    PreFilter,
    Filter,
    Score,
    Permit,
    Scale
});
record!(Resources {
    cpu_milli,
    memory_mib,
    gpus
});
record!(Task {
    role,
    index,
    request
});
record!(GangState {
    id,
    reserved,
    min_member,
    present,
    waited_ms
});
record!(ScaleDecision {
    id,
    workers,
    reason
});

impl Lift<wit::PreFilterResult> for sdk::PreFilterResult {
    fn lift(&self) -> wit::PreFilterResult {
        match self {
            sdk::PreFilterResult::Proceed(s) => wit::PreFilterResult::Proceed(s.clone()),
            sdk::PreFilterResult::Skip(r) => wit::PreFilterResult::Skip(r.clone()),
        }
    }
}

impl Lift<wit::PermitResult> for sdk::PermitResult {
    fn lift(&self) -> wit::PermitResult {
        match self {
            sdk::PermitResult::Allow => wit::PermitResult::Allow,
            sdk::PermitResult::Wait(ms) => wit::PermitResult::Wait(*ms),
            sdk::PermitResult::Reject(r) => wit::PermitResult::Reject(r.clone()),
        }
    }
}
