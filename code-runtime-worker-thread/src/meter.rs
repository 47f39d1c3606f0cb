//! [`Meter`]: the bound on every host-side walk over program data (a conversion to JSON, a
//! `console` rendering, an exception's text). A program controls the shape of what it hands over
//! (a string of hundreds of megabytes, an array holding the same one sixty-four times, a DAG
//! whose unfolding is exponential), so the walk charges each piece before it copies it, and looks
//! at the run's termination as it goes: the host's deadlines hold while the walk runs.

use crate::termination::Termination;

/// Steps between two looks at the termination flag: a look is an atomic load, a step is at
/// least one call into V8, so this keeps the looks out of the profile and the response within
/// microseconds.
const STEPS_PER_LOOK: u32 = 256;

/// What a metered walk may still produce.
pub(crate) struct Meter<'r> {
    left: usize,
    termination: &'r Termination,
    steps: u32,
}

/// Why a metered walk stopped short.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Halt {
    /// What it would produce is larger than its bound.
    TooLarge,
    /// The run was terminated meanwhile (a budget, cancellation, disposal).
    Terminated,
}

impl<'r> Meter<'r> {
    /// A meter of `limit` bytes for a walk of the run `termination` belongs to.
    pub(crate) fn new(limit: usize, termination: &'r Termination) -> Self {
        Self { left: limit, termination, steps: 0 }
    }

    /// Takes `bytes` from what is left, one step of the walk.
    pub(crate) fn charge(&mut self, bytes: usize) -> Result<(), Halt> {
        self.step()?;
        self.left = self.left.checked_sub(bytes).ok_or(Halt::TooLarge)?;
        Ok(())
    }

    /// Whether `bytes` more would fit, without taking them: checked before a copy whose exact
    /// size is known only after it is made.
    pub(crate) fn fits(&self, bytes: usize) -> bool {
        bytes <= self.left
    }

    /// What is left.
    pub(crate) fn left(&self) -> usize {
        self.left
    }

    fn step(&mut self) -> Result<(), Halt> {
        self.steps = self.steps.wrapping_add(1);
        if self.steps % STEPS_PER_LOOK == 0 && self.termination.cause().is_some() {
            return Err(Halt::Terminated);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::termination::Cause;

    #[test]
    fn charges_until_the_bound_and_sees_termination() {
        let termination = Termination::default();
        let mut meter = Meter::new(10, &termination);
        assert_eq!(meter.charge(4), Ok(()));
        assert!(meter.fits(6) && !meter.fits(7));
        assert_eq!(meter.charge(7), Err(Halt::TooLarge));
        assert_eq!(meter.left(), 6);
        termination.claim(Cause::Host);
        let stopped = (0..=STEPS_PER_LOOK).map(|_| meter.charge(0)).find(Result::is_err);
        assert_eq!(stopped, Some(Err(Halt::Terminated)));
    }
}
