//! A job's speed-up by worker count: what the job (or its model) says one
//! more worker buys, so a policy need not assume a scaling curve.

use serde::{Deserialize, Serialize};

/// The most worker counts a speed-up lists (interface 0.4 bounds it too).
pub const MAX_SPEEDUP_ENTRIES: usize = 1024;

/// A job's goodput with 1, 2, … workers placed on as few nodes as hold
/// them, in thousandths of its goodput with one worker (entry 0 is 1000).
/// Empty: not known.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<u32>", into = "Vec<u32>")]
pub struct Speedup(Vec<u32>);

/// Why figures are not a speed-up.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BadSpeedup {
    #[error("{0} worker counts, at most {MAX_SPEEDUP_ENTRIES}")]
    TooMany(usize),
    #[error("entry {at} ({text:?}) is not a number")]
    NotANumber { at: usize, text: String },
    #[error("entry {at} ({value}) is not a positive finite goodput")]
    NotPositive { at: usize, value: f64 },
    #[error("entry 0 is {0}, not 1000 (thousandths of the goodput with one worker)")]
    NotRelative(u32),
}

impl Speedup {
    /// Goodputs with 1, 2, … workers, in any unit (samples per second, say):
    /// kept relative to the first.
    ///
    /// # Errors
    /// More than [`MAX_SPEEDUP_ENTRIES`], or one not positive and finite.
    pub fn from_goodputs(goodputs: &[f64]) -> Result<Speedup, BadSpeedup> {
        if goodputs.len() > MAX_SPEEDUP_ENTRIES {
            return Err(BadSpeedup::TooMany(goodputs.len()));
        }
        if let Some((at, &value)) = goodputs
            .iter()
            .enumerate()
            .find(|(_, g)| !(g.is_finite() && **g > 0.0))
        {
            return Err(BadSpeedup::NotPositive { at, value });
        }
        let Some(&one) = goodputs.first() else {
            return Ok(Speedup::default());
        };
        Ok(Speedup(
            goodputs
                .iter()
                .map(|g| (g / one * 1000.0).round().min(f64::from(u32::MAX)) as u32)
                .collect(),
        ))
    }

    /// Goodputs written `g1,g2,…` (a pod group's `dragon.dev/speedup`):
    /// see [`Speedup::from_goodputs`].
    ///
    /// # Errors
    /// An entry that is not a number, and as [`Speedup::from_goodputs`].
    pub fn parse(text: &str) -> Result<Speedup, BadSpeedup> {
        let entries: Vec<&str> = text
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .collect();
        if entries.len() > MAX_SPEEDUP_ENTRIES {
            return Err(BadSpeedup::TooMany(entries.len()));
        }
        let goodputs = entries
            .iter()
            .enumerate()
            .map(|(at, e)| {
                e.parse::<f64>().map_err(|_| BadSpeedup::NotANumber {
                    at,
                    text: (*e).to_string(),
                })
            })
            .collect::<Result<Vec<f64>, _>>()?;
        Speedup::from_goodputs(&goodputs)
    }

    /// The figures for at most `workers` workers.
    pub fn truncated(mut self, workers: u32) -> Speedup {
        self.0.truncate(workers as usize);
        self
    }

    /// The figures, in thousandths of the goodput with one worker.
    pub fn as_milli(&self) -> &[u32] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl TryFrom<Vec<u32>> for Speedup {
    type Error = BadSpeedup;

    fn try_from(milli: Vec<u32>) -> Result<Speedup, BadSpeedup> {
        if milli.len() > MAX_SPEEDUP_ENTRIES {
            return Err(BadSpeedup::TooMany(milli.len()));
        }
        if let Some(at) = milli.iter().position(|&m| m == 0) {
            return Err(BadSpeedup::NotPositive { at, value: 0.0 });
        }
        match milli.first() {
            Some(&first) if first != 1000 => Err(BadSpeedup::NotRelative(first)),
            _ => Ok(Speedup(milli)),
        }
    }
}

impl From<Speedup> for Vec<u32> {
    fn from(s: Speedup) -> Vec<u32> {
        s.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goodputs_are_kept_relative_to_one_worker_and_bad_ones_are_named() {
        let s = Speedup::parse("120, 228,330.5").unwrap();
        assert_eq!(s.as_milli(), [1000, 1900, 2754]);
        assert_eq!(Speedup::parse("").unwrap(), Speedup::default());
        assert_eq!(
            Speedup::parse("1,x").unwrap_err(),
            BadSpeedup::NotANumber {
                at: 1,
                text: "x".into()
            }
        );
        assert!(matches!(
            Speedup::parse("1,-2"),
            Err(BadSpeedup::NotPositive { at: 1, .. })
        ));
        assert!(matches!(
            Speedup::parse("1,inf"),
            Err(BadSpeedup::NotPositive { at: 1, .. })
        ));
        let many = vec!["1"; MAX_SPEEDUP_ENTRIES + 1].join(",");
        assert_eq!(
            Speedup::parse(&many).unwrap_err(),
            BadSpeedup::TooMany(MAX_SPEEDUP_ENTRIES + 1)
        );
    }

    #[test]
    fn a_recorded_speedup_reads_back_and_a_malformed_one_is_refused() {
        let s = Speedup::from_goodputs(&[2.0, 3.0]).unwrap();
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, "[1000,1500]");
        assert_eq!(serde_json::from_str::<Speedup>(&json).unwrap(), s);
        assert!(serde_json::from_str::<Speedup>("[900,1500]").is_err());
        assert!(serde_json::from_str::<Speedup>("[1000,0]").is_err());
    }
}
