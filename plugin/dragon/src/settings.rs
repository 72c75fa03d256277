//! DRAGON's settings. Defaults follow the final original code (see dragon.md).

use serde::Deserialize;

/// Thresholds and switches, from the policy's JSON settings.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Scale running jobs down when the head of the queue has waited this
    /// long (the original's final code: 2 minutes).
    pub starvation_threshold_s: f64,
    /// Scale running jobs up when nothing was admitted or scaled down for
    /// this long (the original's final code: 1 minute).
    pub idle_threshold_s: f64,
    /// Enable scale-down on starvation.
    pub scale_down: bool,
    /// Enable scale-up on idleness.
    pub scale_up: bool,
    /// Grow jobs even while jobs wait in the queue. Off by default: growing
    /// while others wait only sets up the next starvation shrink (and its
    /// restart cost); the original left this case unspecified.
    pub grow_while_waiting: bool,
    /// Grow each job by as many workers as the idle room allows in one
    /// step (one restart) instead of one worker per step (the original).
    pub grow_to_fill: bool,
    /// Admit a gang at `min` workers when it does not fit as requested.
    pub admit_at_min: bool,
    /// How long a gang waits in permit for members that do not exist yet.
    pub gang_timeout_s: f64,
    /// Order the queue by arrival alone (the original), not by priority
    /// first.
    pub ignore_priority: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            starvation_threshold_s: 120.0,
            idle_threshold_s: 60.0,
            scale_down: true,
            scale_up: true,
            grow_while_waiting: false,
            grow_to_fill: false,
            admit_at_min: true,
            gang_timeout_s: 60.0,
            ignore_priority: false,
        }
    }
}

impl Settings {
    /// Parse JSON settings; `""` and `"{}"` give the defaults.
    pub fn parse(text: &str) -> Result<Settings, String> {
        let settings: Settings = if text.trim().is_empty() {
            Settings::default()
        } else {
            serde_json::from_str(text).map_err(|e| format!("invalid dragon settings: {e}"))?
        };
        for (name, v) in [
            ("starvation_threshold_s", settings.starvation_threshold_s),
            ("idle_threshold_s", settings.idle_threshold_s),
            ("gang_timeout_s", settings.gang_timeout_s),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(format!(
                    "invalid dragon settings: {name} must be a non-negative number of seconds, got {v}"
                ));
            }
        }
        Ok(settings)
    }

    pub(crate) fn starvation_ms(&self) -> u64 {
        (self.starvation_threshold_s * 1000.0) as u64
    }

    pub(crate) fn idle_ms(&self) -> u64 {
        (self.idle_threshold_s * 1000.0) as u64
    }

    pub(crate) fn gang_timeout_ms(&self) -> u64 {
        (self.gang_timeout_s * 1000.0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_settings_give_the_papers_defaults() {
        let s = Settings::parse("{}").unwrap();
        assert_eq!(s.starvation_threshold_s, 120.0);
        assert_eq!(s.idle_threshold_s, 60.0);
        assert_eq!(Settings::parse("").unwrap(), s);
    }

    #[test]
    fn unknown_keys_and_negative_thresholds_are_refused() {
        let e = Settings::parse(r#"{"starvation_treshold_s": 5}"#).unwrap_err();
        assert!(e.contains("starvation_treshold_s"), "{e}");
        let e = Settings::parse(r#"{"idle_threshold_s": -1}"#).unwrap_err();
        assert!(e.contains("idle_threshold_s"), "{e}");
    }
}
