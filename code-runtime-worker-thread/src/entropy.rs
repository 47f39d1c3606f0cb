//! The program's clock and randomness ([`Entropy`]): in a run that may pause or that resumes
//! (`Start::determinism`), the run's seed and the clock the host's answers carry, so a program
//! run again from its start sees the same numbers; in any other run, the machine's. The globals
//! that read them are `builtins.rs`'.

use std::cell::{Cell, RefCell};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use code_runtime::provider::Determinism;

/// A program's clock and its random sources.
pub(crate) struct Entropy {
    source: Source,
    /// What `performance.now()` counts from.
    origin: Origin,
}

enum Source {
    /// The run's seed and clock.
    Reproducible {
        /// What the program's clock reads, in milliseconds since the epoch.
        clock: Cell<f64>,
        random: RefCell<Xoshiro256>,
        bytes: RefCell<Xoshiro256>,
    },
    /// The machine's.
    Machine,
}

enum Origin {
    Clock(f64),
    Instant(Instant),
}

impl Entropy {
    pub(crate) fn new(determinism: Option<Determinism>) -> Self {
        match determinism {
            Some(Determinism { seed, started_ms, .. }) => Self {
                source: Source::Reproducible {
                    clock: Cell::new(started_ms),
                    random: RefCell::new(Xoshiro256::seeded(seed)),
                    // A stream of its own, so `crypto` does not move `Math.random`.
                    bytes: RefCell::new(Xoshiro256::seeded(seed ^ 0x9E37_79B9_7F4A_7C15)),
                },
                origin: Origin::Clock(started_ms),
            },
            None => Self { source: Source::Machine, origin: Origin::Instant(Instant::now()) },
        }
    }

    /// Whether the numbers are the run's (and `Math.random` and `Date` are replaced).
    pub(crate) fn reproducible(&self) -> bool {
        matches!(self.source, Source::Reproducible { .. })
    }

    /// The host's answer came with `clock_ms`: the clock reads at least that from now on.
    pub(crate) fn advance(&self, clock_ms: f64) {
        if let Source::Reproducible { clock, .. } = &self.source {
            if clock_ms > clock.get() {
                clock.set(clock_ms);
            }
        }
    }

    /// What the clock reads, in milliseconds since the epoch: the run's clock moved by
    /// [`Determinism::STEP_MS`], or the machine's.
    pub(crate) fn now_ms(&self) -> f64 {
        match &self.source {
            Source::Reproducible { clock, .. } => {
                let now = clock.get() + Determinism::STEP_MS;
                clock.set(now);
                now
            }
            Source::Machine => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |since| since.as_secs_f64() * 1e3),
        }
    }

    /// `performance.now()`: milliseconds since the run started.
    pub(crate) fn since_start_ms(&self) -> f64 {
        match self.origin {
            Origin::Clock(started_ms) => self.now_ms() - started_ms,
            Origin::Instant(started) => started.elapsed().as_secs_f64() * 1e3,
        }
    }

    /// `Math.random()` in a reproducible run: 53 random bits in `[0, 1)`.
    pub(crate) fn random(&self) -> f64 {
        match &self.source {
            Source::Reproducible { random, .. } => random.borrow_mut().unit(),
            // Not installed over the machine's `Math.random`.
            Source::Machine => 0.0,
        }
    }

    /// Fills `bytes`: from the run's seed, or the operating system's random source.
    pub(crate) fn fill(&self, out: &mut [u8]) -> bool {
        match &self.source {
            Source::Reproducible { bytes, .. } => {
                let mut bytes = bytes.borrow_mut();
                for chunk in out.chunks_mut(8) {
                    chunk.copy_from_slice(&bytes.next().to_le_bytes()[..chunk.len()]);
                }
                true
            }
            Source::Machine => getrandom::fill(out).is_ok(),
        }
    }
}

/// xoshiro256** (Blackman and Vigna): fast, 256 bits of state, seeded through SplitMix64. Not a
/// source of secrets: in a reproducible run the seed is in the checkpoint anyway.
struct Xoshiro256([u64; 4]);

impl Xoshiro256 {
    fn seeded(seed: u64) -> Self {
        let mut state = seed;
        let mut split = || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Self([split(), split(), split(), split()])
    }

    fn next(&mut self) -> u64 {
        let s = &mut self.0;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    fn unit(&mut self) -> f64 {
        // The top 53 bits, scaled: every double in [0, 1) a multiple of 2^-53.
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_numbers_and_another_seed_others() {
        let draw = |seed| {
            let entropy = Entropy::new(Some(Determinism::new(seed, 1_000.0)));
            let mut bytes = [0u8; 13];
            assert!(entropy.fill(&mut bytes));
            (entropy.random(), entropy.random(), bytes)
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
        let (a, b, _) = draw(3);
        assert!((0.0..1.0).contains(&a) && (0.0..1.0).contains(&b) && a != b);
    }

    #[test]
    fn the_run_clock_moves_by_a_step_per_reading_and_with_the_answers_never_back() {
        let entropy = Entropy::new(Some(Determinism::new(1, 1_000.0)));
        assert_eq!(entropy.now_ms(), 1_000.0 + Determinism::STEP_MS);
        entropy.advance(5_000.0);
        assert_eq!(entropy.now_ms(), 5_000.0 + Determinism::STEP_MS);
        entropy.advance(10.0);
        assert!(entropy.now_ms() > 5_000.0);
        assert!(entropy.since_start_ms() > 4_000.0);
    }
}
