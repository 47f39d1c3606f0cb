//! The output ledger: docs/reference.md §3.10 and the language-neutral cases of §5.6, played as the
//! host loop plays them (admit each log in order, then settle how the run ended).

use code_runtime::json;
use code_runtime::provider::{Admission, Ending, OutputLedger, StopReason};
use code_runtime::{CodeRunFailure, CodeRunResult, FailureKind, JsonValue, Limits};

use crate::{failed, failure, ok};

/// Admits `logs` in order (as the host loop does, ignoring drops), then settles `ending`.
fn run(max: usize, logs: &[&str], ending: Ending) -> CodeRunResult {
    let mut ledger = OutputLedger::new(max);
    for log in logs {
        let _ = ledger.admit_log((*log).to_owned());
    }
    ledger.settle(ending)
}

fn returned(value: JsonValue) -> Ending {
    Ending::Completed(Some(value))
}

fn threw(message: impl Into<String>) -> Ending {
    Ending::Threw(message.into())
}

fn output_limit(max: usize) -> CodeRunFailure {
    failure(FailureKind::OutputLimit, &format!("outer output exceeded {max} bytes"))
}

/// `bytes(JSON(logs)) + bytes(JSON(value or error.message))`, what docs/reference.md calls the counted
/// output; `BOUND(n)` asserts it is at most `n`.
fn counted(result: &CodeRunResult) -> usize {
    let logs = JsonValue::Array(result.logs().iter().map(|log| json!(log)).collect());
    let tail = match (result.value(), result.error()) {
        (Some(value), _) => json::encode(value).len(),
        (None, Some(error)) => json::string_len(error.message()),
        (None, None) => 0,
    };
    json::encode(&logs).len() + tail
}

#[test]
fn c060_runaway_logs() {
    let lines: Vec<String> = (0..1000).map(|i| format!("spam line {i}")).collect();
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let result = run(300, &lines, returned(json!(1)));
    let mut expected: Vec<String> = (0..18).map(|i| format!("spam line {i}")).collect();
    expected.push("spa".to_owned());
    assert_eq!(result.logs(), expected);
    assert_eq!(result.value(), None);
    assert_eq!(result.error(), Some(&output_limit(300)));
    assert!(counted(&result) <= 300);
}

#[test]
fn c061_oversized_first_log() {
    let entry = format!("start-{}", "😀\"\\\n".repeat(100));
    let result = run(96, &[&entry], returned(JsonValue::Null));
    let kept = format!("start-{}😀", "😀\"\\\n".repeat(5));
    assert_eq!(
        result,
        failed(&[&kept], FailureKind::OutputLimit, "outer output exceeded 96 bytes")
    );
    assert!(counted(&result) <= 96);
}

#[test]
fn c062_oversized_return() {
    let result = run(64, &[], returned(json!("y".repeat(10_000))));
    assert_eq!(result, failed(&[], FailureKind::OutputLimit, "outer output exceeded 64 bytes"));
}

#[test]
fn c063_exact_utf8_boundary() {
    assert_eq!(run(7, &[], returned(json!("€"))), ok(&[], Some(json!("€"))));
    assert_eq!(run(6, &[], returned(json!("€"))), failed(&[], FailureKind::OutputLimit, "ou"));
}

#[test]
fn c064_combined_ledger() {
    assert_eq!(run(11, &["abc"], returned(json!("xy"))), ok(&["abc"], Some(json!("xy"))));
    let over = run(10, &["abc"], returned(json!("xy")));
    assert_eq!(over, failed(&[], FailureKind::OutputLimit, "outer "));
    assert!(counted(&over) <= 10);
}

#[test]
fn c065_exception_diagnostic_in_the_ledger() {
    let threw = || threw("xy");
    assert_eq!(run(11, &["abc"], threw()), failed(&["abc"], FailureKind::Exception, "xy"));
    let over = run(10, &["abc"], threw());
    assert_eq!(over, failed(&[], FailureKind::OutputLimit, "outer "));
    assert!(counted(&over) <= 10);
}

#[test]
fn c066_giant_stack_never_crosses() {
    let stack = format!("Error: {}\n    at program:1:7", "x".repeat(1_000_000));
    let result = run(64, &[], threw(stack));
    assert_eq!(result, failed(&[], FailureKind::OutputLimit, "outer output exceeded 64 bytes"));
}

#[test]
fn c068_large_exact_container() {
    let value = JsonValue::from(vec![json!(7); 50_000]);
    let result = run(67_108_864, &[], returned(value.clone()));
    assert_eq!(result, ok(&[], Some(value)));
}

#[test]
fn c069_c070_default_cap_boundary() {
    // 2 for `[]` + 2 quotes + 67 108 860 characters = 67 108 864, the default cap. The value has to
    // exist to be returned; the ledger meters it without ever encoding it.
    let limits = Limits::default();
    assert_eq!(limits.max_output_bytes, 67_108_864);
    let mut text = "x".repeat(67_108_860);
    let result = OutputLedger::new(limits.output_bytes()).settle(returned(JsonValue::String(text)));
    assert!(result.is_ok(), "{:?}", result.error());
    assert_eq!(result.value().and_then(JsonValue::as_str).map(str::len), Some(67_108_860));
    assert!(result.logs().is_empty());

    let mut result = result;
    let Some(JsonValue::String(returned_text)) = result.take_value() else {
        unreachable!("checked above")
    };
    text = returned_text;
    text.push('x');
    let result = OutputLedger::new(limits.output_bytes()).settle(returned(JsonValue::String(text)));
    assert_eq!(
        result,
        failed(&[], FailureKind::OutputLimit, "outer output exceeded 67108864 bytes")
    );
}

#[test]
fn c073_output_limit_masks_a_timeout() {
    let result =
        run(40, &[&"x".repeat(20)], Ending::Stopped(StopReason::WallClock { max_wall_ms: 300 }));
    assert_eq!(
        result,
        failed(&["xxxx"], FailureKind::OutputLimit, "outer output exceeded 40 bytes")
    );
}

#[test]
fn cap_4_leaves_an_empty_diagnostic() {
    assert_eq!(run(4, &[], returned(json!("too long"))), failed(&[], FailureKind::OutputLimit, ""));
    assert_eq!(run(4, &["a"], returned(json!(1))), failed(&[], FailureKind::OutputLimit, ""));
    // `[]` plus `""`: the smallest cap that can still say something fits an empty string exactly.
    assert_eq!(run(4, &[], returned(json!(""))), ok(&[], Some(json!(""))));
}

#[test]
fn cap_15_truncates_the_diagnostic() {
    assert_eq!(
        run(15, &[], returned(json!("y".repeat(100)))),
        failed(&[], FailureKind::OutputLimit, "outer outpu")
    );
}

#[test]
fn cap_64_keeps_the_whole_diagnostic() {
    let result = run(64, &["a", "b"], returned(json!("y".repeat(100))));
    // 64 - 32 reserved leaves 32 for logs: both entries fit.
    assert_eq!(
        result,
        failed(&["a", "b"], FailureKind::OutputLimit, "outer output exceeded 64 bytes")
    );
    assert_eq!(counted(&result), r#"["a","b"]"#.len() + 32);
}

#[test]
fn invalid_completion_is_invalid_output() {
    let result = run(1_000, &["before"], returned(json!({"x": [1, -0.0]})));
    assert_eq!(
        result,
        failed(&["before"], FailureKind::InvalidOutput, "program completion must be lossless JSON")
    );
    let inexact = run(1_000, &[], returned(json!(9_007_199_254_740_993u64)));
    assert_eq!(inexact.error().map(|e| e.kind()), Some(FailureKind::InvalidOutput));
}

#[test]
fn invalid_output_whose_diagnostic_does_not_fit_is_output_limit() {
    // `program completion must be lossless JSON` needs 42 bytes as a JSON string.
    let result = run(43, &[], returned(json!(-0.0)));
    assert_eq!(result, failed(&[], FailureKind::OutputLimit, "outer output exceeded 43 bytes"));
    assert_eq!(
        run(44, &[], returned(json!(-0.0))).error().map(|e| e.kind()),
        Some(FailureKind::InvalidOutput)
    );
}

#[test]
fn nothing_returned_has_no_value_and_null_is_a_value() {
    assert_eq!(run(100, &["a"], Ending::Completed(None)).to_json(), r#"{"logs":["a"]}"#);
    assert_eq!(
        run(100, &["a"], returned(JsonValue::Null)).to_json(),
        r#"{"logs":["a"],"value":null}"#
    );
}

#[test]
fn entries_after_an_overflow_are_dropped() {
    let mut ledger = OutputLedger::new(20);
    assert_eq!(ledger.admit_log("0123456789".to_owned()), Admission::Admitted);
    assert_eq!(ledger.used(), 14);
    assert_eq!(ledger.admit_log("overflowing".to_owned()), Admission::Exceeded);
    assert!(ledger.is_exceeded());
    assert_eq!(ledger.admit_log("x".to_owned()), Admission::Exceeded, "even one that would fit");
    assert_eq!(ledger.logs(), ["0123456789"]);
    // Whatever the program did next, the run is an output-limit.
    // 20 - 32 reserved leaves no room for logs; the message gets `20 - 2` bytes.
    let result = ledger.settle(returned(json!(1)));
    assert_eq!(result, failed(&[], FailureKind::OutputLimit, "outer output exc"));
}

#[test]
fn substrate_signalled_overflow_uses_the_admitted_logs() {
    let mut ledger = OutputLedger::new(100);
    let _ = ledger.admit_log("kept".to_owned());
    ledger.exceed();
    assert_eq!(ledger.admit_log("dropped".to_owned()), Admission::Exceeded);
    let result = ledger.settle(threw("boom"));
    assert_eq!(
        result,
        failed(&["kept"], FailureKind::OutputLimit, "outer output exceeded 100 bytes")
    );
    // Before the ledger, which knows the budget, the stop names no number it does not know.
    assert_eq!(StopReason::OutputExceeded.to_string(), "outer output exceeded the output budget");
}

#[test]
fn ledger_counts_exactly_what_the_encoder_writes() {
    let logs = ["", "plain", "tab\there", "quote\"", "€😀", "\u{0}\u{1f}", "\u{2028}"];
    let mut ledger = OutputLedger::new(usize::MAX);
    for log in logs {
        assert_eq!(ledger.admit_log(log.to_owned()), Admission::Admitted);
    }
    let encoded = json::encode(&JsonValue::Array(logs.iter().map(|log| json!(log)).collect()));
    assert_eq!(ledger.used(), encoded.len());
    assert_eq!(ledger.remaining(), usize::MAX - encoded.len());
}

#[test]
fn every_cap_bounds_every_result() {
    // BOUND(max) for a spread of caps, logs and endings: nothing a ledger returns exceeds its cap,
    // and an output-limit message is always a prefix of the full diagnostic.
    let logs = ["alpha", "βeta \"quoted\"", "😀😀😀", "line\nbreak", &"z".repeat(40)];
    let endings = || {
        [
            Ending::Completed(None),
            returned(json!({"k": [1, "two", null]})),
            returned(json!("€".repeat(30))),
            threw("Error: boom\n    at program:3:9"),
            Ending::Stopped(StopReason::Compute { compute_ms: 100 }),
            Ending::Stopped(StopReason::Cancelled),
        ]
    };
    for max in 4..=160 {
        for count in 0..=logs.len() {
            for ending in endings() {
                let result = run(max, &logs[..count], ending);
                assert!(counted(&result) <= max, "max {max}, {count} logs: {}", result.to_json());
                if let Some(error) = result.error().filter(|e| e.kind() == FailureKind::OutputLimit)
                {
                    assert!(
                        format!("outer output exceeded {max} bytes").starts_with(error.message())
                    );
                    assert_eq!(result.value(), None);
                }
                assert!(result.value().is_none() || result.error().is_none());
            }
        }
    }
}

/// A ledger with exactly `remaining` bytes left under `max`, after one log entry.
fn with_remaining(max: usize, remaining: usize) -> OutputLedger {
    let mut ledger = OutputLedger::new(max);
    // The entry costs its length plus two quotes, on top of the 2 bytes of `[]`.
    let _ = ledger.admit_log("a".repeat(max - remaining - 4));
    assert_eq!(ledger.remaining(), remaining);
    ledger
}

#[test]
fn c112_value_larger_than_what_remains() {
    let result = with_remaining(64, 10).settle(returned(json!("x".repeat(50))));
    assert_eq!(result.error(), Some(&output_limit(64)));
    assert!(counted(&result) <= 64);
}

#[test]
fn c113_value_exactly_what_remains() {
    assert_eq!(with_remaining(64, 5).settle(returned(json!("€"))).value(), Some(&json!("€")));
    let over = with_remaining(64, 4).settle(returned(json!("€")));
    assert_eq!(over.error(), Some(&output_limit(64)));
}

#[test]
fn c115_invalid_output_diagnostic_needs_its_42_bytes() {
    let result = with_remaining(64, 4).settle(returned(json!([-0.0])));
    assert_eq!(result.error(), Some(&output_limit(64)));
    let fits = with_remaining(64, 42).settle(returned(json!([-0.0])));
    assert_eq!(
        fits.error(),
        Some(&failure(FailureKind::InvalidOutput, "program completion must be lossless JSON"))
    );
}

#[test]
fn c116_thrown_message_against_what_remains() {
    let fits = with_remaining(64, 6).settle(threw("boom"));
    assert_eq!(fits.error(), Some(&failure(FailureKind::Exception, "boom")));
    assert_eq!(fits.logs(), ["a".repeat(54)]);
    let over = with_remaining(64, 5).settle(threw("boom"));
    assert_eq!(over.error(), Some(&output_limit(64)));
    assert!(counted(&over) <= 64);
}

#[test]
fn c124_cap_4_log_then_null() {
    let result = run(4, &["12345"], returned(JsonValue::Null));
    assert_eq!(result, failed(&[], FailureKind::OutputLimit, ""));
}

#[test]
fn c127_million_character_throws_at_cap_64() {
    for message in ["x".repeat(1_000_000), format!("Error: {}", "x".repeat(1_000_000))] {
        let result = run(64, &[], threw(message));
        assert_eq!(result, failed(&[], FailureKind::OutputLimit, "outer output exceeded 64 bytes"));
    }
}

#[test]
fn a_stop_for_output_is_the_limit_result() {
    let mut ledger = OutputLedger::new(100);
    let _ = ledger.admit_log("kept".to_owned());
    let result = ledger.settle(Ending::Stopped(StopReason::OutputExceeded));
    assert_eq!(
        result,
        failed(&["kept"], FailureKind::OutputLimit, "outer output exceeded 100 bytes")
    );
    // Before the ledger, which knows the budget, the stop names no number it does not know.
    assert_eq!(StopReason::OutputExceeded.to_string(), "outer output exceeded the output budget");
}

#[test]
fn every_ending_has_its_catalogued_failure() {
    let cases = [
        (Ending::Threw("boom".into()), FailureKind::Exception, "boom"),
        (
            Ending::InvalidOutput,
            FailureKind::InvalidOutput,
            "program completion must be lossless JSON",
        ),
        (Ending::Stopped(StopReason::Cancelled), FailureKind::Abort, "cancelled"),
        (Ending::Stopped(StopReason::Disposed), FailureKind::Abort, "runtime disposed"),
        (
            Ending::Stopped(StopReason::WallClock { max_wall_ms: 300 }),
            FailureKind::Timeout,
            "wall-clock ceiling reached (300ms)",
        ),
        (
            Ending::Stopped(StopReason::Compute { compute_ms: 100 }),
            FailureKind::Timeout,
            "compute budget exhausted (100ms busy)",
        ),
        (
            Ending::Stopped(StopReason::OutOfMemory { max_memory_mb: 64 }),
            FailureKind::WorkerExit,
            "worker error: out of memory: the program exceeded its 64 MB memory budget",
        ),
        (
            Ending::Exited(Some(3)),
            FailureKind::WorkerExit,
            "worker exited with code 3 before completing",
        ),
        (
            Ending::Exited(None),
            FailureKind::WorkerExit,
            "worker exited with code unknown before completing",
        ),
        (Ending::Failed("spawn".into()), FailureKind::WorkerExit, "worker error: spawn"),
    ];
    for (ending, kind, message) in cases {
        let result = OutputLedger::new(10_000).settle(ending);
        assert_eq!(result.error(), Some(&failure(kind, message)));
    }
}

/// A result shrunk to `max_bytes` fits, and says from how much to how much.
fn check_shrunk(original: &CodeRunResult, max_bytes: usize) -> CodeRunResult {
    let shrunk = code_runtime::provider::shrink_result(original.clone(), max_bytes);
    let truncated = shrunk.truncated().expect("it was cut");
    assert_eq!(truncated.from_bytes as usize, counted(original));
    assert_eq!(truncated.to_bytes as usize, counted(&shrunk));
    assert!(counted(&shrunk) <= max_bytes, "{} > {max_bytes}", counted(&shrunk));
    shrunk
}

#[test]
fn a_result_over_its_truncation_budget_shrinks_logs_and_value_together() {
    let lines: Vec<String> = (0..500).map(|i| format!("progress {i}")).collect();
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let rows: Vec<JsonValue> =
        (0..2_000).map(|i| json!({"id": i, "name": "x".repeat(50)})).collect();
    let original = run(usize::MAX, &lines, returned(json!({ "rows": rows })));
    let shrunk = check_shrunk(&original, 2_000);
    assert!(shrunk.is_ok());
    let rows = shrunk.value().unwrap()["rows"].as_array().unwrap();
    assert!(rows.last().unwrap().as_str().unwrap().ends_with(" more items"));
    assert!(shrunk.logs().last().unwrap().ends_with(" more items"));
    assert_eq!(shrunk.logs()[0], "progress 0");
    // Its JSON form says it was cut, and reads back the same.
    let text = shrunk.to_json();
    let truncated = shrunk.truncated().unwrap();
    assert!(
        text.ends_with(&format!(
            ",\"truncated\":{{\"fromBytes\":{},\"toBytes\":{}}}}}",
            truncated.from_bytes, truncated.to_bytes
        )),
        "{text}"
    );
    let read: CodeRunResult = serde_json::from_str(&text).unwrap();
    assert_eq!(read, shrunk);
    let serialized = serde_json::to_string(&read).unwrap();
    assert!(serialized.contains("\"truncated\":{\"fromBytes\""), "{serialized}");
}

#[test]
fn a_failure_keeps_its_kind_and_a_cut_message() {
    let original = run(usize::MAX, &["before"], threw("E".repeat(100_000)));
    let shrunk = check_shrunk(&original, 500);
    let error = shrunk.error().unwrap();
    assert_eq!(error.kind(), FailureKind::Exception);
    assert!(error.message().starts_with("EEE") && error.message().contains("…[truncated "));
    assert_eq!(shrunk.logs(), ["before"]);
}

#[test]
fn a_result_within_its_truncation_budget_is_untouched() {
    let original = run(usize::MAX, &["a", "b"], returned(json!({"k": [1, 2, 3]})));
    let same = code_runtime::provider::shrink_result(original.clone(), counted(&original));
    assert_eq!(same, original);
    assert_eq!(same.truncated(), None);
    assert!(!same.to_json().contains("truncated"));
    // A budget below any cut hands the result back whole rather than lose its kind.
    let tiny = code_runtime::provider::shrink_result(original.clone(), 3);
    assert_eq!(tiny, original);
}
