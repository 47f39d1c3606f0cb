//! Provider budgets: defaults and validation (docs/reference.md §5.3, shared by both providers).

use code_runtime::provider::OutputLedger;
use code_runtime::{ContractError, Limits, RunLimits};

#[track_caller]
fn check_invalid(limits: Limits, expected: &str) {
    let error = limits.validate().expect_err("must be rejected");
    assert_eq!(error.to_string(), expected);
}

#[test]
fn c035_defaults() {
    let limits = Limits::default();
    assert_eq!(
        (limits.compute_ms, limits.max_wall_ms, limits.max_output_bytes, limits.max_memory_mb),
        (60_000, 600_000, 67_108_864, 512)
    );
    assert_eq!(
        (limits.max_calls, limits.max_calls_per_function, limits.max_pending_calls),
        (10_000, 10_000, 1_000)
    );
    assert_eq!(limits.validate(), Ok(()));
    assert_eq!(limits.output_bytes(), 67_108_864);
}

#[test]
fn c032_c035_zero_is_not_a_positive_number() {
    // Negative, fractional and non-finite values cannot be expressed: the fields are `u64`.
    let base = Limits::default();
    check_invalid(
        Limits { compute_ms: 0, ..base },
        "code-runtime: config.compute_ms must be a positive number, got 0",
    );
    check_invalid(
        Limits { max_wall_ms: 0, ..base },
        "code-runtime: config.max_wall_ms must be a positive number, got 0",
    );
    check_invalid(
        Limits { max_output_bytes: 0, ..base },
        "code-runtime: config.max_output_bytes must be a positive number, got 0",
    );
    check_invalid(
        Limits { max_memory_mb: 0, ..base },
        "code-runtime: config.max_memory_mb must be a positive number, got 0",
    );
    check_invalid(
        Limits { max_calls: 0, ..base },
        "code-runtime: config.max_calls must be a positive number, got 0",
    );
    check_invalid(
        Limits { max_calls_per_function: 0, ..base },
        "code-runtime: config.max_calls_per_function must be a positive number, got 0",
    );
    check_invalid(
        Limits { max_pending_calls: 0, ..base },
        "code-runtime: config.max_pending_calls must be a positive number, got 0",
    );
}

#[test]
fn c033_wall_ceiling_bound() {
    let base = Limits::default();
    check_invalid(
        Limits { max_wall_ms: 2_147_483_648, ..base },
        "code-runtime: config.max_wall_ms must be at most 2147483647, got 2147483648",
    );
    assert_eq!(Limits { max_wall_ms: 2_147_483_647, ..base }.validate(), Ok(()));
}

/// Every budget has a ceiling where it is read, so that no number past what a double holds
/// exactly (a `--memory-mb 18446744073709551615`) passes validation and breaks a run later: the
/// largest accepted value of each is accepted, the next one refused with what it must be.
#[test]
fn every_budget_is_bounded_where_it_is_read() {
    use code_runtime::Budget;
    let largest = |budget: Budget| match budget {
        Budget::Wall => Limits::MAX_WALL_MS,
        Budget::Output => Limits::MAX_OUTPUT_BYTES,
        Budget::Memory => Limits::MAX_MEMORY_MB,
        Budget::SessionBytes => Limits::MAX_SESSION_BYTES,
        _ => Limits::MAX_SAFE,
    };
    assert_eq!(Limits::MAX_SAFE, 9_007_199_254_740_991);
    for budget in Budget::ALL {
        let top = largest(budget);
        assert_eq!(budget.check(top), Ok(()), "{}", budget.name());
        for past in [top + 1, 1 << 53, u64::MAX] {
            let why = budget.check(past).expect_err(budget.name());
            assert!(why.starts_with("must be"), "{}: {why}", budget.name());
            let mut limits = Limits::default();
            *budget.slot(&mut limits) = past;
            let error = limits.validate().expect_err(budget.name());
            assert_eq!(error.key(), budget.name());
            assert!(error.to_string().ends_with(&format!("got {past}")), "{error}");
        }
    }
    check_invalid(
        Limits { max_memory_mb: u64::MAX, ..Limits::default() },
        "code-runtime: config.max_memory_mb must be at most 1048576 (a tebibyte), got 18446744073709551615",
    );
}

#[test]
fn c034_output_cap_of_at_least_4() {
    let base = Limits::default();
    check_invalid(
        Limits { max_output_bytes: 3, ..base },
        "code-runtime: config.max_output_bytes must be a safe integer of at least 4, got 3",
    );
    assert_eq!(Limits { max_output_bytes: 4, ..base }.validate(), Ok(()));
    assert_eq!(OutputLedger::MIN_MAX_OUTPUT_BYTES, 4);
    check_invalid(
        Limits { max_output_bytes: 1 << 53, ..base },
        "code-runtime: config.max_output_bytes must be a safe integer of at least 4, got 9007199254740992",
    );
    assert_eq!(Limits { max_output_bytes: (1 << 53) - 1, ..base }.validate(), Ok(()));
}

#[test]
fn the_first_invalid_field_is_reported() {
    let limits = Limits {
        compute_ms: 0,
        max_wall_ms: 0,
        max_output_bytes: 1,
        max_memory_mb: 0,
        ..Limits::default()
    };
    assert_eq!(limits.validate().unwrap_err().key(), "compute_ms");
}

#[test]
fn a_request_tightens_the_provider_limits() {
    let provider = Limits { compute_ms: 1_000, max_wall_ms: 5_000, ..Limits::default() };
    let tightened = provider
        .tighten(&RunLimits {
            compute_ms: Some(10),
            max_output_bytes: Some(64),
            ..RunLimits::default()
        })
        .unwrap();
    assert_eq!(
        tightened,
        Limits { compute_ms: 10, max_output_bytes: 64, ..provider },
        "unset limits stay the provider's"
    );
    assert_eq!(provider.tighten(&RunLimits::default()), Ok(provider));
    let calls = RunLimits {
        max_calls: Some(50),
        max_calls_per_function: Some(5),
        max_pending_calls: Some(4),
        ..RunLimits::default()
    };
    assert_eq!(
        provider.tighten(&calls),
        Ok(Limits { max_calls: 50, max_calls_per_function: 5, max_pending_calls: 4, ..provider })
    );
    assert_eq!(
        provider.tighten(&RunLimits { max_wall_ms: Some(5_000), ..RunLimits::default() }),
        Ok(provider)
    );
}

#[test]
fn a_request_never_loosens_the_provider_limits() {
    let provider = Limits { compute_ms: 1_000, ..Limits::default() };
    let error = provider
        .tighten(&RunLimits { compute_ms: Some(1_001), ..RunLimits::default() })
        .unwrap_err();
    assert_eq!(
        error,
        ContractError::InvalidRunLimit { key: "compute_ms", value: 1_001, provider: 1_000 }
    );
    assert_eq!(
        error.to_string(),
        "code-runtime: request limit compute_ms must be between 1 and the provider's 1000, got 1001"
    );
    for limits in [
        RunLimits { max_wall_ms: Some(0), ..RunLimits::default() },
        RunLimits { max_memory_mb: Some(513), ..RunLimits::default() },
        RunLimits { max_output_bytes: Some(3), ..RunLimits::default() },
        RunLimits { max_calls: Some(10_001), ..RunLimits::default() },
        RunLimits { max_calls_per_function: Some(0), ..RunLimits::default() },
        RunLimits { max_pending_calls: Some(1_001), ..RunLimits::default() },
    ] {
        assert!(provider.tighten(&limits).is_err(), "{limits:?}");
    }
}

/// Each budget is declared once; everything that lists the budgets reads the declaration.
#[test]
fn each_budget_is_declared_once_and_every_spelling_finds_it() {
    use code_runtime::Budget;
    let defaults = Limits::default();
    let mut names = std::collections::HashSet::new();
    for budget in Budget::ALL {
        for spelling in [budget.name(), budget.key(), budget.flag()] {
            assert!(names.insert(spelling), "{spelling} names two budgets");
        }
        assert_eq!(Budget::from_name(budget.name()), Some(budget));
        assert_eq!(Budget::from_name(budget.key()), Some(budget));
        // The flag is the key in kebab case (`timeoutMs`, `--timeout-ms`).
        let kebab: String = budget
            .key()
            .chars()
            .flat_map(|c| match c.is_ascii_uppercase() {
                true => vec!['-', c.to_ascii_lowercase()],
                false => vec![c],
            })
            .collect();
        assert_eq!(budget.flag(), kebab);
        assert_eq!(budget.of(&defaults), budget.default_value());
        // Its slots are its own: setting one sets no other budget.
        let mut limits = defaults;
        *budget.slot(&mut limits) = 7;
        let mut run = RunLimits::default();
        *budget.request_slot(&mut run) = Some(7);
        for other in Budget::ALL {
            let expected = if other == budget { 7 } else { other.default_value() };
            assert_eq!(other.of(&limits), expected, "{} after {}", other.name(), budget.name());
            assert_eq!(other.requested(&run), (other == budget).then_some(7));
        }
        assert_eq!(defaults.overridden(&run), limits);
        // A zero is never a budget: at construction it is misuse, in a request too.
        assert_eq!(budget.check(0), Err("must be a positive number"));
        let zero = defaults.overridden(&run_of(budget, 0));
        let error = zero.validate().expect_err("zero");
        assert_eq!(error.key(), budget.name());
        assert!(matches!(
            defaults.tighten(&run_of(budget, 0)),
            Err(ContractError::InvalidRunLimit { key, value: 0, .. }) if key == budget.name()
        ));
    }
    assert_eq!(Budget::from_name("heapMb"), None);
}

fn run_of(budget: code_runtime::Budget, value: u64) -> RunLimits {
    let mut run = RunLimits::default();
    *budget.request_slot(&mut run) = Some(value);
    run
}
