//! Interface 0.3: the node row carries its domain at every topology level,
//! and the changes carry the levels (with a reset) and the queues.

use super::shapes::{levelled_shapes, shared_shapes};
use crate::bindings::v0_3::dragon::scheduler::types as v;
use crate::view::{ClusterView, Delta, JobStats, QueueRow};
use crate::wit;

levelled_shapes!();
shared_shapes!();
