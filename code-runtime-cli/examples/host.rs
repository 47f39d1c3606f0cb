//! A host with both languages, as a Rust agent host sets one up: one `Context` holding a
//! TypeScript and a Python provider, bindings with state of their own (a key-value store shared by
//! every run), a typed rejection with structured data, and a per-request limit.
//!
//! `cargo run -p code-runtime-cli --example host` (offline, with `RUSTY_V8_ARCHIVE` exported as
//! `.ci/run` does).
#![allow(clippy::print_stdout, reason = "an example prints what it shows")]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use code_runtime::{
    BindingError, CodeBindingNamespace, CodeRunRequest, Context, RunLimits, binding_with,
};
use code_runtime::{JsonValue, json};
use code_runtime_python::{PythonCodeRuntime, PythonConfig};
use code_runtime_worker_thread::{WorkerThreadCodeRuntime, WorkerThreadConfig};

/// The host's state: what the bindings of every run read and write.
#[derive(Clone, Default)]
struct Store(Arc<Mutex<BTreeMap<String, JsonValue>>>);

/// The `kv` namespace: `put`, `get` and `keys` over one store.
fn kv(store: &Store) -> CodeBindingNamespace {
    CodeBindingNamespace::new("kv")
        .function(
            "put",
            binding_with(store.clone(), |store: Store, args| async move {
                let key = args["key"].as_str().ok_or("key must be a string")?.to_owned();
                let value = args.get("value").cloned().unwrap_or_default();
                store.0.lock().map_err(|_| "the store is poisoned")?.insert(key, value);
                Ok(json!(true))
            }),
        )
        .function(
            "get",
            binding_with(store.clone(), |store: Store, args| async move {
                let key = args["key"].as_str().ok_or("key must be a string")?;
                let store = store.0.lock().map_err(|_| "the store is poisoned")?;
                match store.get(key) {
                    Some(value) => Ok(value.clone()),
                    // A rejection the program can branch on: `e.data.status`.
                    None => Err(BindingError::new(format!("no key {key:?}"))
                        .with_data(json!({ "status": 404, "key": key }))),
                }
            }),
        )
        .function(
            "keys",
            binding_with(store.clone(), |store: Store, _args| async move {
                let store = store.0.lock().map_err(|_| "the store is poisoned")?;
                Ok(json!(store.keys().collect::<Vec<_>>()))
            }),
        )
        .error_class("KvError", "operation")
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // At startup: one provider per language. `start` probes the interpreter off the executor
    // (and reads the probe cached by an earlier process when there is one).
    let context = Context::new();
    context.provide_code_runtime(Arc::new(WorkerThreadCodeRuntime::new(
        WorkerThreadConfig::default(),
    )?))?;
    context
        .provide_code_runtime(Arc::new(PythonCodeRuntime::start(PythonConfig::default()).await?))?;
    let store = Store::default();

    // A model turn in TypeScript: write, then read one key that is there and one that is not.
    let typescript = r#"
await kv.put({ key: "greeting", value: "hello" });
await kv.put({ key: "count", value: 2 });
let missing = null;
try { await kv.get({ key: "nope" }) } catch (e) { missing = [e.operation, e.data.status] }
return { greeting: await kv.get({ key: "greeting" }), missing };
"#;
    let runtime = context.code_runtime("typescript")?;
    let result = runtime.run(CodeRunRequest::new(typescript).binding(kv(&store))).await?;
    println!("typescript: {}", result.to_json());

    // The next turn in Python sees what the first one stored, under a tighter wall clock.
    let python = "keys = await kv.keys()\ncount = await kv.get(key='count')\nprint('keys', keys)\nreturn {'keys': keys, 'next': count + 1}";
    let request = CodeRunRequest::new(python)
        .binding(kv(&store))
        .limits(RunLimits { max_wall_ms: Some(10_000), ..RunLimits::default() });
    let result = context.code_runtime("python")?.run(request).await?;
    println!("python: {}", result.to_json());

    context.dispose().await;
    Ok(())
}
