//! The result vocabulary and its JSON shape (REFERENCE.md §1.5).

use code_runtime::{CodeRunFailure, CodeRunResult, FailureKind, JsonValue};
use serde_json::json;

use crate::nested_arrays;

#[test]
fn failure_kinds_serialize_as_the_six_strings() {
    let spelled: Vec<String> =
        FailureKind::ALL.iter().map(|kind| serde_json::to_string(kind).unwrap()).collect();
    assert_eq!(
        spelled,
        [
            r#""exception""#,
            r#""timeout""#,
            r#""abort""#,
            r#""worker-exit""#,
            r#""invalid-output""#,
            r#""output-limit""#
        ]
    );
    for kind in FailureKind::ALL {
        assert_eq!(serde_json::from_str::<FailureKind>(&format!("\"{kind}\"")).unwrap(), kind);
    }
    assert!(serde_json::from_str::<FailureKind>(r#""worker_exit""#).is_err());
}

#[test]
fn value_key_is_absent_when_there_is_none() {
    let nothing = CodeRunResult::completed(vec!["a".into()], None);
    assert_eq!(serde_json::to_string(&nothing).unwrap(), r#"{"logs":["a"]}"#);
    assert_eq!(nothing.to_json(), r#"{"logs":["a"]}"#);
    let null = CodeRunResult::completed(vec![], Some(JsonValue::Null));
    assert_eq!(serde_json::to_string(&null).unwrap(), r#"{"logs":[],"value":null}"#);
    assert_eq!(null.to_json(), r#"{"logs":[],"value":null}"#);
}

#[test]
fn failure_shape() {
    let result = CodeRunResult::failed(vec![], CodeRunFailure::worker_exited(1));
    let expected = r#"{"logs":[],"error":{"kind":"worker-exit","message":"worker exited with code 1 before completing"}}"#;
    assert_eq!(serde_json::to_string(&result).unwrap(), expected);
    assert_eq!(result.to_json(), expected);
    assert!(!result.is_ok());
    assert_eq!(result.value(), None);
}

#[test]
fn round_trips_through_serde() {
    for text in [
        r#"{"logs":[]}"#,
        r#"{"logs":["x"],"value":null}"#,
        r#"{"logs":["x"],"value":{"b":[1,2],"a":"€"}}"#,
        r#"{"logs":[],"error":{"kind":"timeout","message":"wall-clock ceiling reached (5ms)"}}"#,
    ] {
        let result: CodeRunResult = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::to_string(&result).unwrap(), text);
        assert_eq!(result.to_json(), text);
    }
    let null: CodeRunResult = serde_json::from_str(r#"{"logs":[],"value":null}"#).unwrap();
    assert_eq!(null.value(), Some(&JsonValue::Null), "a present null is a value");
}

#[test]
fn deserializing_rejects_value_and_error_together() {
    let both = r#"{"logs":[],"value":1,"error":{"kind":"exception","message":"x"}}"#;
    let error = serde_json::from_str::<CodeRunResult>(both).unwrap_err().to_string();
    assert!(error.contains("both `value` and `error`"), "{error}");
    assert!(serde_json::from_str::<CodeRunResult>(r#"{"value":1}"#).is_err(), "logs are required");
    assert!(serde_json::from_str::<CodeRunResult>(r#"{"logs":[],"extra":1}"#).is_err());
    assert!(
        serde_json::from_str::<CodeRunResult>(
            r#"{"logs":[],"error":{"kind":"oops","message":""}}"#
        )
        .is_err()
    );
}

#[test]
fn message_catalogue() {
    let cases = [
        (
            CodeRunFailure::compute_budget_exhausted(100),
            FailureKind::Timeout,
            "compute budget exhausted (100ms busy)",
        ),
        (
            CodeRunFailure::wall_clock_reached(2_000),
            FailureKind::Timeout,
            "wall-clock ceiling reached (2000ms)",
        ),
        (CodeRunFailure::cancelled(), FailureKind::Abort, "cancelled"),
        (CodeRunFailure::runtime_disposed(), FailureKind::Abort, "runtime disposed"),
        (
            CodeRunFailure::worker_exited(137),
            FailureKind::WorkerExit,
            "worker exited with code 137 before completing",
        ),
        (
            CodeRunFailure::worker_error("out of memory"),
            FailureKind::WorkerExit,
            "worker error: out of memory",
        ),
        (
            CodeRunFailure::invalid_output(),
            FailureKind::InvalidOutput,
            "program completion must be lossless JSON",
        ),
        (
            CodeRunFailure::output_limit(64),
            FailureKind::OutputLimit,
            "outer output exceeded 64 bytes",
        ),
        (
            CodeRunFailure::unrenderable_exception(),
            FailureKind::Exception,
            "program threw an unrenderable value",
        ),
    ];
    for (failure, kind, message) in cases {
        assert_eq!((failure.kind, failure.message.as_str()), (kind, message));
    }
    assert_eq!(CodeRunFailure::exception("boom").to_string(), "exception: boom");
}

#[test]
fn into_parts_separates_value_and_failure() {
    let (logs, outcome) = CodeRunResult::completed(vec!["l".into()], Some(json!(3))).into_parts();
    assert_eq!((logs, outcome), (vec!["l".to_owned()], Ok(Some(json!(3)))));
    let (_, outcome) = CodeRunResult::failed(vec![], CodeRunFailure::cancelled()).into_parts();
    assert_eq!(outcome, Err(CodeRunFailure::cancelled()));
}

#[test]
fn deep_results_encode_and_drop_without_recursion() {
    let result = CodeRunResult::completed(vec![], Some(nested_arrays(100_000)));
    let encoded = result.to_json();
    assert_eq!(encoded.len(), r#"{"logs":[],"value":}"#.len() + 200_004);
    drop(result);
}
