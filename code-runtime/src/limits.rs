//! [`Limits`]: the budgets every provider enforces, with their defaults and their validation;
//! [`RunLimits`]: a request's tightening of them; [`Budget`]: each of the ten declared once, in
//! one table (`budgets!`: its field, its document key, its command-line flag, what it counts and
//! in what unit, its default, its bounds), so that everything that lists them ([`Limits`]'
//! validation, tightening and default, [`RunLimits`], the limits file, the command's flags, the
//! Python package's keyword arguments) is derived from it and [`Budget::ALL`].

use std::ops::RangeInclusive;

use crate::error::{ConfigError, ContractError};

/// Declares the budgets from one table: for each, the field of [`Limits`] (its documentation, its
/// name, which is also [`RunLimits`]' field and the Python package's keyword), the [`Budget`]
/// variant (what it counts, in a phrase), and its [`Declaration`]. Adding a budget is one entry.
macro_rules! budgets {
    ($(
        $(#[doc = $doc:literal])*
        $field:ident: $variant:ident ($what:literal) {
            key: $key:literal,
            flag: $flag:literal,
            about: $about:expr,
            default: $default:expr,
            bounds: $bounds:expr,
            requirement: $requirement:expr $(,)?
        }
    )*) => {
        /// The budgets of every run of a provider. Part of each provider's configuration and
        /// validated when the provider is constructed; a request may only tighten them
        /// ([`RunLimits`], applied by [`Limits::tighten`]).
        ///
        /// ```
        /// let limits = code_runtime::Limits { compute_ms: 5_000, ..Default::default() };
        /// limits.validate()?;
        /// # Ok::<(), code_runtime::ConfigError>(())
        /// ```
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct Limits {
            $(
                $(#[doc = $doc])*
                pub $field: u64,
            )*
        }

        /// Per-request budgets: each `Some` tightens the provider's [`Limits`] for one run.
        ///
        /// A request can only tighten: a value above the provider's, or zero, makes `run` fail
        /// with a [`ContractError`] that names it.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct RunLimits {
            $(
                #[doc = concat!(
                    $what, " ([`Limits::", stringify!($field), "`](Limits::", stringify!($field),
                    "))."
                )]
                pub $field: Option<u64>,
            )*
        }

        /// One budget of a run.
        ///
        /// ```
        /// use code_runtime::{Budget, Limits};
        ///
        /// assert_eq!(Budget::Wall.name(), "max_wall_ms");
        /// assert_eq!(Budget::Wall.key(), "timeoutMs");
        /// assert_eq!(Budget::Wall.flag(), "timeout-ms");
        /// assert_eq!(Budget::Wall.of(&Limits::default()), 600_000);
        /// assert_eq!(Budget::from_name("maxCalls"), Some(Budget::Calls));
        /// ```
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Budget {
            $(
                #[doc = concat!(
                    $what, " ([`Limits::", stringify!($field), "`](Limits::", stringify!($field),
                    "))."
                )]
                $variant,
            )*
        }

        impl Budget {
            const COUNT: usize = [$(stringify!($variant)),*].len();

            /// Every budget, in [`Limits`]' declaration order (the order validation checks them).
            pub const ALL: [Budget; Self::COUNT] = [$(Budget::$variant,)*];

            fn declaration(self) -> Declaration {
                match self {
                    $(Budget::$variant => Declaration {
                        name: stringify!($field),
                        key: $key,
                        flag: $flag,
                        about: $about,
                        default: $default,
                        bounds: $bounds,
                        requirement: $requirement,
                    },)*
                }
            }

            /// Its field in `limits`.
            pub fn slot(self, limits: &mut Limits) -> &mut u64 {
                match self {
                    $(Budget::$variant => &mut limits.$field,)*
                }
            }

            /// Its field in `run`.
            pub fn request_slot(self, run: &mut RunLimits) -> &mut Option<u64> {
                match self {
                    $(Budget::$variant => &mut run.$field,)*
                }
            }
        }

        impl Default for Limits {
            fn default() -> Self {
                Self { $($field: $default,)* }
            }
        }
    };
}

budgets! {
    /// CPU time the program may consume, in milliseconds. Awaiting a binding costs at most tens
    /// of microseconds of it (both providers look for the answer briefly before they sleep); a
    /// hot loop always accrues. Default 60 000.
    compute_ms: Compute("CPU time, in milliseconds") {
        key: "computeMs",
        flag: "compute-ms",
        about: "CPU budget in milliseconds",
        default: 60_000,
        bounds: 1..=Limits::MAX_SAFE,
        requirement: SAFE,
    }
    /// The wall clock, in milliseconds, from the moment `run` is called (time spent waiting for a
    /// free slot of the provider counts); it stands still while a call waits for an approval
    /// decision. Must be at most 2 147 483 647 (about 24.8 days). Default 600 000. The command
    /// line calls it `--timeout-ms`.
    max_wall_ms: Wall("The wall clock, in milliseconds") {
        key: "timeoutMs",
        flag: "timeout-ms",
        about: concat!(
            "Wall-clock ceiling in milliseconds; it stands still while a call waits for ",
            "a decision"
        ),
        default: 600_000,
        bounds: 1..=Limits::MAX_WALL_MS,
        requirement: "must be at most 2147483647",
    }
    /// The combined output budget of the output ledger, in bytes: at least 4, at most 2^53 - 1.
    /// Default 67 108 864 (64 MiB).
    max_output_bytes: Output("Logs plus the value or the error, in bytes of JSON") {
        key: "maxOutputBytes",
        flag: "max-output-bytes",
        about: "Output budget over the logs plus the value or message, in bytes",
        default: 67_108_864,
        bounds: Limits::MIN_OUTPUT_BYTES..=Limits::MAX_OUTPUT_BYTES,
        requirement: "must be a safe integer of at least 4",
    }
    /// Memory the program may use, in MiB. What that covers differs by provider (V8 heap plus
    /// ArrayBuffer memory; a child's address space); see each provider's docs. Default 512.
    max_memory_mb: Memory("Memory, in MiB") {
        key: "memoryMb",
        flag: "memory-mb",
        about: concat!(
            "Memory budget in MiB; what the program makes the host hold (values, calls, ",
            "output) is held to it as well"
        ),
        default: 512,
        bounds: 1..=Limits::MAX_MEMORY_MB,
        requirement: "must be at most 1048576 (a tebibyte)",
    }
    /// Binding calls a run may make in all. A call over it rejects with a catalogued message and
    /// data `{"budget": "maxCalls", "limit": N}`, and no host closure runs. Default 10 000.
    max_calls: Calls("Binding calls in all") {
        key: "maxCalls",
        flag: "max-calls",
        about: "Binding calls a run may make; more reject",
        default: 10_000,
        bounds: 1..=Limits::MAX_SAFE,
        requirement: SAFE,
    }
    /// Calls a run may make to any one function (`budget` `"maxCallsPerFunction"`). Default
    /// 10 000.
    max_calls_per_function: CallsPerFunction("Calls to any one function") {
        key: "maxCallsPerFunction",
        flag: "max-calls-per-function",
        about: "Binding calls a run may make to any one function; more reject",
        default: 10_000,
        bounds: 1..=Limits::MAX_SAFE,
        requirement: SAFE,
    }
    /// Calls the host runs at once for one run: more wait their turn, in call order, and start as
    /// calls in flight settle (`Promise.all` over 5 000 calls works, as in any JavaScript engine).
    /// It bounds the host's work, not the program: a waiting call holds its argument in the run's
    /// memory budget, so a flood nobody awaits ends at that budget or at `max_calls`. Default
    /// 1 000.
    max_pending_calls: PendingCalls("Calls the host runs at once") {
        key: "maxPendingCalls",
        flag: "max-pending-calls",
        about: "Binding calls in flight at once; more wait their turn",
        default: 1_000,
        bounds: 1..=Limits::MAX_SAFE,
        requirement: SAFE,
    }
    /// What a session may carry from one run to the next, in bytes: its values' serialized bytes,
    /// its definitions' sources, and 64 for each name. A run whose state would pass it keeps the
    /// session's previous state and says so; the run itself is not failed. At most a gibibyte.
    /// Default 67 108 864 (64 MiB).
    max_session_bytes: SessionBytes("What a session carries between runs, in bytes") {
        key: "maxSessionBytes",
        flag: "max-session-bytes",
        about: "What a session may carry from one run to the next, in bytes",
        default: 67_108_864,
        bounds: 1..=Limits::MAX_SESSION_BYTES,
        requirement: "must be at most 1073741824 (a gibibyte)",
    }
    /// How long a session may stay unused before it expires, in milliseconds; the next run in its
    /// name starts empty and says `"restored": "expired"`. Default 3 600 000 (an hour).
    session_idle_ms: SessionIdle("How long a session may stay unused, in milliseconds") {
        key: "sessionIdleMs",
        flag: "session-idle-ms",
        about: "How long a session may stay unused before it expires, in milliseconds",
        default: 3_600_000,
        bounds: 1..=Limits::MAX_SAFE,
        requirement: SAFE,
    }
    /// How many sessions a host keeps; past it, the least recently used is evicted (its next run
    /// says `"restored": "expired"`). Default 1 000.
    max_sessions: Sessions("Sessions a host keeps") {
        key: "maxSessions",
        flag: "max-sessions",
        about: "Sessions a host keeps; the least recently used is evicted first",
        default: 1_000,
        bounds: 1..=Limits::MAX_SAFE,
        requirement: SAFE,
    }
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

    /// The largest accepted count or number of milliseconds of the other budgets: the largest
    /// integer a double holds exactly, so every budget reads the same in JavaScript, in Python
    /// and in JSON.
    pub const MAX_SAFE: u64 = (1 << 53) - 1;

    /// The largest accepted `max_session_bytes`: a gibibyte.
    pub const MAX_SESSION_BYTES: u64 = 1 << 30;

    /// The largest accepted `max_memory_mb`: a tebibyte, which in bytes (what a cell's rlimits
    /// and V8's heap limit take) still fits every integer type on the way.
    pub const MAX_MEMORY_MB: u64 = 1 << 20;

    /// Checks every field, in declaration order ([`Budget::check`]).
    ///
    /// # Errors
    ///
    /// The first invalid field, e.g. `code-runtime: config.compute_ms must be a positive number,
    /// got 0`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for budget in Budget::ALL {
            let value = budget.of(self);
            budget.check(value).map_err(|why| ConfigError::new(budget.name(), why, value))?;
        }
        Ok(())
    }

    /// These limits with each budget `overrides` sets in place (not checked: a provider's
    /// construction validates them).
    #[must_use]
    pub fn overridden(self, overrides: &RunLimits) -> Limits {
        let mut limits = self;
        for budget in Budget::ALL {
            if let Some(value) = budget.requested(overrides) {
                *budget.slot(&mut limits) = value;
            }
        }
        limits
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
        let mut limits = *self;
        for budget in Budget::ALL {
            let provider = budget.of(self);
            let Some(value) = budget.requested(request) else { continue };
            if !(1..=provider).contains(&value) || budget.check(value).is_err() {
                return Err(ContractError::InvalidRunLimit { key: budget.name(), value, provider });
            }
            *budget.slot(&mut limits) = value;
        }
        Ok(limits)
    }
}

/// What is declared of each budget.
struct Declaration {
    /// The field of [`Limits`] and [`RunLimits`], and the Python package's keyword.
    name: &'static str,
    /// A limits file's key, and the MCP config's `"limits"` key.
    key: &'static str,
    /// The command line's long flag.
    flag: &'static str,
    /// What it counts, for help texts.
    about: &'static str,
    default: u64,
    bounds: RangeInclusive<u64>,
    /// What a value out of `bounds` is told (a zero is told "must be a positive number").
    requirement: &'static str,
}

const POSITIVE: &str = "must be a positive number";
/// What a count or a number of milliseconds past [`Limits::MAX_SAFE`] is told.
const SAFE: &str = "must be at most 9007199254740991";

impl Budget {
    /// Its field in [`Limits`] and [`RunLimits`], the Python package's keyword:
    /// `"compute_ms"`, `"max_wall_ms"`, `"max_output_bytes"`, `"max_memory_mb"`, `"max_calls"`,
    /// `"max_calls_per_function"`, `"max_pending_calls"`, `"max_session_bytes"`,
    /// `"session_idle_ms"`, `"max_sessions"`.
    pub fn name(self) -> &'static str {
        self.declaration().name
    }

    /// Its key in a limits file and the MCP config's `"limits"`: `"computeMs"`, `"timeoutMs"`,
    /// `"maxOutputBytes"`, `"memoryMb"`, `"maxCalls"`, `"maxCallsPerFunction"`,
    /// `"maxPendingCalls"`, `"maxSessionBytes"`, `"sessionIdleMs"`, `"maxSessions"`.
    pub fn key(self) -> &'static str {
        self.declaration().key
    }

    /// Its long flag on the command line, without the dashes (`"timeout-ms"`).
    pub fn flag(self) -> &'static str {
        self.declaration().flag
    }

    /// What it bounds, in a sentence for help texts.
    pub fn about(self) -> &'static str {
        self.declaration().about
    }

    /// Its value in [`Limits::default`].
    pub fn default_value(self) -> u64 {
        self.declaration().default
    }

    /// The budget of a name: its [`name`](Self::name) or its [`key`](Self::key).
    pub fn from_name(name: &str) -> Option<Budget> {
        Budget::ALL.into_iter().find(|budget| budget.name() == name || budget.key() == name)
    }

    /// Its value in `limits`.
    pub fn of(self, limits: &Limits) -> u64 {
        *self.slot(&mut limits.clone())
    }

    /// Its value in `run`, if the run asks for one.
    pub fn requested(self, run: &RunLimits) -> Option<u64> {
        *self.request_slot(&mut run.clone())
    }

    /// Whether `value` is a valid setting of it; `Err` says what it must be.
    pub fn check(self, value: u64) -> Result<(), &'static str> {
        let declaration = self.declaration();
        match value {
            0 => Err(POSITIVE),
            value if declaration.bounds.contains(&value) => Ok(()),
            _ => Err(declaration.requirement),
        }
    }
}
