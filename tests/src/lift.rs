//! Field-for-field conversion between the host's and the SDK's generated
//! types (both come from the same WIT). The native adapter uses it so that
//! "native" in a benchmark costs what native code costs, a copy of the inputs,
//! not a serde round trip.

use dragon_host::runtime::wit;
use dragon_policy_sdk::types as sdk;

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
record!(Unit {
    id,
    arrival_ms,
    priority,
    gang,
    tasks,
    workers,
    min_workers,
    max_workers,
    running
});
record!(Capacity {
    alloc_cpu_milli,
    alloc_memory_mib,
    alloc_gpus,
    free_cpu_milli,
    free_memory_mib,
    free_gpus
});
record!(Candidates {
    index,
    capacity,
    siblings
});
record!(Placement { unit, task, now_ms });
record!(Queued {
    id,
    arrival_ms,
    priority,
    pods,
    total
});
record!(GangState {
    id,
    reserved,
    min_member,
    present,
    waited_ms
});
record!(RunningJob {
    id,
    arrival_ms,
    started_ms,
    scaled_ms,
    workers,
    min_workers,
    max_workers,
    worker_request,
    worker_nodes,
    ps_nodes
});
record!(WaitingJob {
    id,
    arrival_ms,
    unit
});
record!(ScaleInput {
    now_ms,
    running,
    waiting,
    nodes,
    last_admit_ms,
    last_scale_down_ms
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
