//! The result vocabulary and its JSON shape (docs/reference.md §1.5).

use code_runtime::json;
use code_runtime::provider::{Ending, OutputLedger, StopReason};
use code_runtime::{CodeRunResult, FailureKind, JsonValue};

use crate::{failed, failure, nested_arrays, ok};

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
    let nothing = ok(&["a"], None);
    assert_eq!(serde_json::to_string(&nothing).unwrap(), r#"{"logs":["a"]}"#);
    assert_eq!(nothing.to_json(), r#"{"logs":["a"]}"#);
    let null = ok(&[], Some(JsonValue::Null));
    assert_eq!(serde_json::to_string(&null).unwrap(), r#"{"logs":[],"value":null}"#);
    assert_eq!(null.to_json(), r#"{"logs":[],"value":null}"#);
}

#[test]
fn failure_shape() {
    let result = OutputLedger::new(1_000).settle(Ending::Exited(Some(1)));
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
fn a_failure_displays_as_kind_and_message() {
    assert_eq!(failure(FailureKind::Exception, "boom").to_string(), "exception: boom");
}

#[test]
fn into_parts_separates_value_and_failure() {
    let (logs, outcome) = ok(&["l"], Some(json!(3))).into_parts();
    assert_eq!((logs, outcome), (vec!["l".to_owned()], Ok(Some(json!(3)))));
    let cancelled = OutputLedger::new(1_000).settle(Ending::Stopped(StopReason::Cancelled));
    assert_eq!(cancelled, failed(&[], FailureKind::Abort, "cancelled"));
    let (_, outcome) = cancelled.into_parts();
    assert_eq!(outcome, Err(failure(FailureKind::Abort, "cancelled")));
}

#[test]
fn deep_results_encode_and_drop_without_recursion() {
    let result =
        OutputLedger::new(usize::MAX).settle(Ending::Completed(Some(nested_arrays(100_000))));
    let encoded = result.to_json();
    assert_eq!(encoded.len(), r#"{"logs":[],"value":}"#.len() + 200_004);
    drop(result);
}
