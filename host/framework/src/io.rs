//! How the framework acts on the cluster: binding pods and scaling jobs.

/// Binds pods to nodes. The shim posts Binding subresources; the simulator
/// records the placement.
pub trait Binder {
    /// Bind `pod` to `node`.
    ///
    /// # Errors
    /// A message saying why the bind failed; the framework releases the gang.
    fn bind(&mut self, pod: &str, node: &str) -> Result<(), String>;

    /// Bind every `(pod, node)` of a round: one result per entry, in order.
    /// The framework calls this once per round, after every unit has been
    /// placed, so an implementation may send the binds concurrently (the shim
    /// does; a bind is a round trip to the API server). The default binds one
    /// after another.
    fn bind_many(&mut self, binds: &[(String, String)]) -> Vec<Result<(), String>> {
        binds
            .iter()
            .map(|(pod, node)| self.bind(pod, node))
            .collect()
    }

    /// Undo the bind of a gang member whose siblings could not be bound, so
    /// the gang is released whole rather than left half running. A bound pod
    /// cannot be unbound in Kubernetes: the shim deletes it when a controller
    /// will recreate it pending, and otherwise keeps it ([`Release::Kept`]),
    /// since deleting it would lose it for good.
    ///
    /// # Errors
    /// A message saying why the pod could not be released.
    fn unbind(&mut self, pod: &str) -> Result<Release, String>;
}

/// What became of a bound gang member the framework released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// Unbound (in Kubernetes: deleted, and its controller makes a fresh
    /// pending copy).
    Unbound,
    /// Left bound: nothing would recreate it. It stays a running member of
    /// its gang, which places the rest when it can.
    Kept,
}

/// Changes a job's worker count (a `/scale` subresource in Kubernetes).
pub trait Scaler {
    /// Set `job`'s workers to `workers`.
    ///
    /// # Errors
    /// A message saying why the scale could not be applied.
    fn scale(&mut self, job: &str, workers: u32, reason: &str) -> Result<(), String>;
}

/// A [`Binder`] and [`Scaler`] that records what it is asked and always
/// succeeds: for `dragon policy run`, tests and benchmarks.
#[derive(Debug, Default, Clone)]
pub struct RecordingIo {
    /// `(pod, node)` in bind order.
    pub binds: Vec<(String, String)>,
    /// Pods unbound.
    pub unbinds: Vec<String>,
    /// `(job, workers, reason)` in order.
    pub scales: Vec<(String, u32, String)>,
}

impl Binder for RecordingIo {
    fn bind(&mut self, pod: &str, node: &str) -> Result<(), String> {
        self.binds.push((pod.to_string(), node.to_string()));
        Ok(())
    }

    fn unbind(&mut self, pod: &str) -> Result<Release, String> {
        self.unbinds.push(pod.to_string());
        Ok(Release::Unbound)
    }
}

impl Scaler for RecordingIo {
    fn scale(&mut self, job: &str, workers: u32, reason: &str) -> Result<(), String> {
        self.scales
            .push((job.to_string(), workers, reason.to_string()));
        Ok(())
    }
}
