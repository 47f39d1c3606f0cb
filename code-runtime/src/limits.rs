//! [`Limits`]: the budgets every provider enforces, with their defaults and their validation.

use crate::error::{ConfigError, ContractError};
use crate::request::RunLimits;

/// The budgets of every run of a provider. Part of each provider's configuration and validated
/// when the provider is constructed; a request may only tighten them ([`RunLimits`], applied by
/// [`Limits::tighten`]).
///
/// ```
/// let limits = code_runtime::Limits { compute_ms: 5_000, ..Default::default() };
/// limits.validate()?;
/// # Ok::<(), code_runtime::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// CPU time the program may consume, in milliseconds. Awaiting a binding costs at most tens
    /// of microseconds of it (both providers look for the answer briefly before they sleep); a
    /// hot loop always accrues. Default 60 000.
    pub compute_ms: u64,
    /// The wall clock, in milliseconds, from the moment `run` is called (time spent waiting for a
    /// free slot of the provider counts); it never pauses. Must be at most 2 147 483 647 (about
    /// 24.8 days). Default 600 000. The command line calls it `--timeout-ms`.
    pub max_wall_ms: u64,
    /// The combined output budget of the output ledger, in bytes: at least 4, at most 2^53 - 1.
    /// Default 67 108 864 (64 MiB).
    pub max_output_bytes: u64,
    /// Memory the program may use, in MiB. What that covers differs by provider (V8 heap plus
    /// ArrayBuffer memory; a child's address space); see each provider's docs. Default 512.
    pub max_memory_mb: u64,
    /// Binding calls a run may make in all. A call over it rejects with a catalogued message and
    /// data `{"budget": "maxCalls", "limit": N}`, and no host closure runs. Default 10 000.
    pub max_calls: u64,
    /// Calls a run may make to any one function (`budget` `"maxCallsPerFunction"`). Default
    /// 10 000.
    pub max_calls_per_function: u64,
    /// Calls the host runs at once for one run: more wait their turn, in call order, and start as
    /// calls in flight settle (`Promise.all` over 5 000 calls works, as in any JavaScript engine).
    /// It bounds the host's work, not the program: a waiting call holds its argument in the run's
    /// memory budget, so a flood nobody awaits ends at that budget or at `max_calls`. Default
    /// 1 000.
    pub max_pending_calls: u64,
}

impl Limits {
    /// The largest accepted `max_wall_ms`: the largest positive `i32`, the common ceiling of timer
    /// APIs, which keeps every wall deadline representable in either language's runtime.
    pub const MAX_WALL_MS: u64 = 2_147_483_647;

    /// The smallest accepted `max_output_bytes`: the empty log array `[]` plus the quotes of an
    /// empty diagnostic, the least the output ledger can account.
    pub const MIN_OUTPUT_BYTES: u64 = 4;

    /// The largest accepted `max_output_bytes`: the largest integer a double holds exactly, so the
    /// budget reads the same in JavaScript.
    pub const MAX_OUTPUT_BYTES: u64 = (1 << 53) - 1;

    /// Checks every field, in declaration order.
    ///
    /// # Errors
    ///
    /// The first invalid field, e.g. `code-runtime: config.compute_ms must be a positive number,
    /// got 0`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (key, value) in [
            ("compute_ms", self.compute_ms),
            ("max_wall_ms", self.max_wall_ms),
            ("max_output_bytes", self.max_output_bytes),
            ("max_memory_mb", self.max_memory_mb),
            ("max_calls", self.max_calls),
            ("max_calls_per_function", self.max_calls_per_function),
            ("max_pending_calls", self.max_pending_calls),
        ] {
            if value == 0 {
                return Err(ConfigError::new(key, "must be a positive number", value));
            }
        }
        if self.max_wall_ms > Self::MAX_WALL_MS {
            return Err(ConfigError::new(
                "max_wall_ms",
                "must be at most 2147483647",
                self.max_wall_ms,
            ));
        }
        let min_output = Self::MIN_OUTPUT_BYTES;
        if !(min_output..=Self::MAX_OUTPUT_BYTES).contains(&self.max_output_bytes) {
            return Err(ConfigError::new(
                "max_output_bytes",
                "must be a safe integer of at least 4",
                self.max_output_bytes,
            ));
        }
        Ok(())
    }

    /// `max_output_bytes` as a `usize`. Validated limits fit on every 64-bit target; saturates
    /// elsewhere.
    pub fn output_bytes(&self) -> usize {
        usize::try_from(self.max_output_bytes).unwrap_or(usize::MAX)
    }

    /// `max_memory_mb` in bytes, saturating.
    pub fn memory_bytes(&self) -> u64 {
        self.max_memory_mb.saturating_mul(1 << 20)
    }

    /// The limits of a provider whose results are shrunk rather than failed
    /// ([`CodeRunRequest::truncate`](crate::CodeRunRequest::truncate)): the output budget raised
    /// to the memory budget (what the host holds for a run is charged to that anyway), so only
    /// the memory budget stops a run that prints or returns too much, and the shrink target
    /// takes the output budget's place.
    #[must_use]
    pub fn shrinking(self) -> Limits {
        let memory = self.memory_bytes().min(Limits::MAX_OUTPUT_BYTES);
        Limits { max_output_bytes: self.max_output_bytes.max(memory), ..self }
    }

    /// These limits, tightened by a request's.
    ///
    /// # Errors
    ///
    /// [`ContractError::InvalidRunLimit`] for a requested value that is zero or above this one.
    pub fn tighten(&self, request: &RunLimits) -> Result<Limits, ContractError> {
        let tightened = |key: &'static str, requested: Option<u64>, provider: u64| match requested {
            None => Ok(provider),
            Some(value) if (1..=provider).contains(&value) => Ok(value),
            Some(value) => Err(ContractError::InvalidRunLimit { key, value, provider }),
        };
        let limits = Limits {
            compute_ms: tightened("compute_ms", request.compute_ms, self.compute_ms)?,
            max_wall_ms: tightened("max_wall_ms", request.max_wall_ms, self.max_wall_ms)?,
            max_output_bytes: tightened(
                "max_output_bytes",
                request.max_output_bytes,
                self.max_output_bytes,
            )?,
            max_memory_mb: tightened("max_memory_mb", request.max_memory_mb, self.max_memory_mb)?,
            max_calls: tightened("max_calls", request.max_calls, self.max_calls)?,
            max_calls_per_function: tightened(
                "max_calls_per_function",
                request.max_calls_per_function,
                self.max_calls_per_function,
            )?,
            max_pending_calls: tightened(
                "max_pending_calls",
                request.max_pending_calls,
                self.max_pending_calls,
            )?,
        };
        if limits.max_output_bytes < Self::MIN_OUTPUT_BYTES {
            return Err(ContractError::InvalidRunLimit {
                key: "max_output_bytes",
                value: limits.max_output_bytes,
                provider: self.max_output_bytes,
            });
        }
        Ok(limits)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            compute_ms: 60_000,
            max_wall_ms: 600_000,
            max_output_bytes: 67_108_864,
            max_memory_mb: 512,
            max_calls: 10_000,
            max_calls_per_function: 10_000,
            max_pending_calls: 1_000,
        }
    }
}
