//! Provider budgets: defaults and validation (REFERENCE.md §5.3, shared by both providers).

use code_runtime::{Limits, OutputLedger};

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
    assert_eq!(limits.validate(), Ok(()));
    assert_eq!(limits.ledger().max(), 67_108_864);
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
    let limits = Limits { compute_ms: 0, max_wall_ms: 0, max_output_bytes: 1, max_memory_mb: 0 };
    assert_eq!(limits.validate().unwrap_err().key(), "compute_ms");
}
