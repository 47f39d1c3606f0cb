//! Bindings as a host writes them: `?` on common errors, structured rejection data, state, and
//! arguments that drop without recursion.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use code_runtime::json;
use code_runtime::{BindingArgs, BindingError, binding, binding_with};

use crate::nested_arrays;

fn call(
    function: &code_runtime::BindingFunction,
    args: code_runtime::JsonValue,
) -> Result<code_runtime::JsonValue, BindingError> {
    futures::executor::block_on(function.call(BindingArgs::new(args)))
}

#[test]
fn question_mark_converts_common_errors() {
    let parse = binding(|args| async move {
        let text = args["text"].as_str().ok_or("text must be a string")?;
        let value: serde_json::Value = serde_json::from_str(text)?;
        Ok(value.into())
    });
    assert_eq!(call(&parse, json!({"text": "[1]"})), Ok(json!([1])));
    assert_eq!(call(&parse, json!({})).unwrap_err().message(), "text must be a string");
    assert_eq!(
        call(&parse, json!({"text": "{"})).unwrap_err().message(),
        "EOF while parsing an object at line 1 column 1"
    );
    let read = binding(|_| async move {
        let bytes = std::fs::read("/nonexistent/code-runtime")?;
        Ok(json!(bytes.len()))
    });
    assert_eq!(
        call(&read, json!(null)).unwrap_err().message(),
        "No such file or directory (os error 2)"
    );
}

#[test]
fn an_error_with_sources_lists_them() {
    #[derive(Debug, thiserror::Error)]
    #[error("fetching the page failed")]
    struct Outer(#[source] std::io::Error);
    let error = BindingError::from(Outer(std::io::Error::other("connection reset")));
    assert_eq!(error.message(), "fetching the page failed: connection reset");
}

#[test]
fn a_rejection_carries_structured_data() {
    let error =
        BindingError::new("rate limited").with_data(json!({"status": 429, "retryAfterMs": 1000}));
    assert_eq!(error.message(), "rate limited");
    assert_eq!(error.data(), Some(&json!({"status": 429, "retryAfterMs": 1000})));
    assert_eq!(BindingError::new("plain").data(), None);
    assert_eq!(
        format!("{error:?}"),
        r#"BindingError { message: "rate limited", data: Some("{\"status\":429,\"retryAfterMs\":1000}") }"#
    );
}

#[test]
fn state_is_cloned_into_each_call() {
    let counter = Arc::new(AtomicU64::new(0));
    let count = binding_with(counter.clone(), |counter: Arc<AtomicU64>, _args| async move {
        Ok(json!(counter.fetch_add(1, Ordering::SeqCst) + 1))
    });
    assert_eq!(call(&count, json!(null)), Ok(json!(1)));
    assert_eq!(call(&count, json!(null)), Ok(json!(2)));
    assert_eq!(counter.load(Ordering::SeqCst), 2);
}

#[test]
fn arguments_deref_parse_and_drop_without_recursion() {
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Query {
        q: String,
        limit: Option<u32>,
    }
    let args = BindingArgs::new(json!({"q": "rust", "limit": 3, "ignored": [[[1]]]}));
    assert_eq!(args["q"], "rust");
    assert_eq!(args.parse::<Query>().unwrap(), Query { q: "rust".into(), limit: Some(3) });
    assert!(
        BindingArgs::new(json!({"q": 1}))
            .parse::<Query>()
            .unwrap_err()
            .message()
            .contains("invalid type")
    );
    // A 100 000-deep argument dropped on a thread with a 256 KiB stack.
    let deep = BindingArgs::new(nested_arrays(100_000));
    std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || drop(deep))
        .unwrap()
        .join()
        .unwrap();
    let deep = BindingError::new("deep").with_data(nested_arrays(100_000));
    std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || drop(deep))
        .unwrap()
        .join()
        .unwrap();
}
