//! Each waiting unit's story: the reasons the rounds gave it, kept as
//! values (a round compares, and copies only a reason that changed; text
//! is made when someone asks).

use std::collections::{BTreeMap, VecDeque};

use dragon_framework::{UnitKey, Unschedulable};

use super::Chapter;

/// Reasons kept per unit (the oldest go first).
pub const MAX_CHAPTERS: usize = 12;
/// Units with a story at most: past it, units new to the loop get none
/// until others are placed or gone.
pub const MAX_UNITS: usize = 20_000;

/// What a round said about a unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Told {
    /// It stays pending, for this reason.
    Pending(Unschedulable),
    /// Anything else the round did to it (released by permit, timed out,
    /// a failed bind, preempting for it), as text.
    Other(String),
}

#[derive(Debug, Clone)]
struct Entry {
    since_ms: u64,
    until_ms: u64,
    rounds: u32,
    told: Told,
}

/// The stories of the units the loop has tried and not placed.
#[derive(Debug, Default)]
pub struct Stories {
    units: BTreeMap<UnitKey, VecDeque<Entry>>,
}

impl Stories {
    /// Add what a round at `now_ms` said about `unit`.
    pub fn note(&mut self, unit: &UnitKey, now_ms: u64, told: Told) {
        if !self.units.contains_key(unit) && self.units.len() >= MAX_UNITS {
            return;
        }
        let entries = self.units.entry(unit.clone()).or_default();
        if let Some(last) = entries.back_mut()
            && last.told == told
        {
            last.until_ms = now_ms;
            last.rounds = last.rounds.saturating_add(1);
            return;
        }
        if entries.len() == MAX_CHAPTERS {
            entries.pop_front();
        }
        entries.push_back(Entry {
            since_ms: now_ms,
            until_ms: now_ms,
            rounds: 1,
            told,
        });
    }

    /// [`Stories::note`] of a pending unit, copying the reason only when
    /// it is not the one the last round gave.
    /// A gang whose members arrive one by one is one chapter, with the
    /// latest count.
    pub fn pending(&mut self, unit: &UnitKey, now_ms: u64, reason: &Unschedulable) {
        if let Some(last) = self.units.get_mut(unit).and_then(|e| e.back_mut())
            && let Told::Pending(r) = &mut last.told
        {
            let arriving = matches!(
                (&*r, reason),
                (
                    Unschedulable::MissingMembers { .. },
                    Unschedulable::MissingMembers { .. }
                )
            );
            if r == reason || arriving {
                if arriving {
                    *r = reason.clone();
                }
                last.until_ms = now_ms;
                last.rounds = last.rounds.saturating_add(1);
                return;
            }
        }
        self.note(unit, now_ms, Told::Pending(reason.clone()));
    }

    /// The unit was placed, or is gone: its story ends.
    pub fn end(&mut self, unit: &UnitKey) {
        self.units.remove(unit);
    }

    /// The reason the last round gave `unit`, if it stays pending.
    pub fn latest(&self, unit: &UnitKey) -> Option<&Unschedulable> {
        match &self.units.get(unit)?.back()?.told {
            Told::Pending(reason) => Some(reason),
            Told::Other(_) => None,
        }
    }

    /// `unit`'s story, oldest first.
    pub fn chapters(&self, unit: &UnitKey) -> Vec<Chapter> {
        self.units
            .get(unit)
            .into_iter()
            .flatten()
            .map(|e| Chapter {
                since_ms: e.since_ms,
                until_ms: e.until_ms,
                rounds: e.rounds,
                reason: match &e.told {
                    Told::Pending(reason) => reason.to_string(),
                    Told::Other(text) => text.clone(),
                },
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.units.len()
    }

    pub fn is_empty(&self) -> bool {
        self.units.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn missing(present: u32) -> Unschedulable {
        Unschedulable::MissingMembers {
            present,
            min_member: 4,
        }
    }

    #[test]
    fn a_reason_repeated_by_many_rounds_is_one_chapter_and_a_new_one_starts_another() {
        let mut s = Stories::default();
        let unit = UnitKey::job("ml/a");
        let short = Unschedulable::ShortOfMinResources {
            short: vec!["4 GPUs".into()],
        };
        s.pending(&unit, 1_000, &short);
        s.pending(&unit, 2_000, &short);
        // Members arriving one by one: one chapter, the latest count.
        s.pending(&unit, 3_000, &missing(2));
        s.pending(&unit, 3_500, &missing(3));
        s.note(&unit, 4_000, Told::Other("released by permit".into()));
        let chapters = s.chapters(&unit);
        assert_eq!(chapters.len(), 3);
        assert_eq!((chapters[0].since_ms, chapters[0].until_ms), (1_000, 2_000));
        assert_eq!(chapters[0].rounds, 2);
        assert_eq!((chapters[1].since_ms, chapters[1].until_ms), (3_000, 3_500));
        assert!(
            chapters[1].reason.contains("3 of minMember 4"),
            "{}",
            chapters[1].reason
        );
        assert_eq!(chapters[2].reason, "released by permit");
        // The last word was not a pending reason.
        assert_eq!(s.latest(&unit), None);
        s.end(&unit);
        assert!(s.chapters(&unit).is_empty());
    }

    #[test]
    fn a_story_keeps_its_newest_chapters_and_the_loop_keeps_a_bounded_number_of_stories() {
        let mut s = Stories::default();
        let unit = UnitKey::job("ml/a");
        let told = |i: u32| Told::Other(format!("round {i}"));
        for i in 0..(MAX_CHAPTERS as u32 + 5) {
            s.note(&unit, u64::from(i), told(i));
        }
        let chapters = s.chapters(&unit);
        assert_eq!(chapters.len(), MAX_CHAPTERS);
        assert_eq!(chapters[0].since_ms, 5);
        s.pending(&unit, 100, &missing(1));
        assert_eq!(s.latest(&unit), Some(&missing(1)));
        for i in 0..MAX_UNITS + 10 {
            s.pending(&UnitKey::job(format!("ml/g{i}")), 0, &missing(1));
        }
        assert_eq!(s.len(), MAX_UNITS);
    }
}
