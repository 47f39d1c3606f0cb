//! The host API where TypeScript has its own cases: program getters that re-enter the bridge,
//! and a deep argument a binding drops. What both languages share is in the provider suites
//! (`conformance/tests/it/providers/host_api.rs`).

use code_runtime::{binding, json};

use crate::*;

#[test]
fn getters_that_call_bindings_and_timers_during_conversion() {
    // A conversion runs program getters; a getter that calls a binding or `setTimeout` re-enters
    // the run's state, which no conversion may hold borrowed.
    let program = r#"
let reads = 0;
const argument = { get a() { reads++; tools.echo({ from: "argument getter" }); setTimeout(() => {}, 0); return 1; } };
const first = await tools.echo(argument);
const result = { get b() { reads++; tools.echo({ from: "result getter" }); setTimeout(() => {}, 0); return 2; } };
return [first, result, { late: { get c() { return reads; } } }];
"#;
    let result = run(program, vec![tools().function("echo", echo())]);
    assert_eq!(value(&result), &json!([{"a": 1}, {"b": 2}, {"late": {"c": 2}}]));
}

#[test]
fn a_binding_that_drops_a_100_000_deep_argument_on_a_2_mib_worker() {
    let small = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_stack_size(2 << 20)
        .enable_all()
        .build()
        .unwrap();
    let ignore = binding(|_args| async { Ok(json!("ignored")) });
    let program = "let deep: unknown = null;\nfor (let i = 0; i < 100_000; i++) deep = [deep];\nreturn await tools.ignore(deep);";
    let request = CodeRunRequest::new(program).binding(tools().function("ignore", ignore));
    let result = small.block_on(async {
        tokio::spawn(async move { default_runtime().run(request).await }).await.unwrap()
    });
    assert_eq!(value(&result.unwrap()), &json!("ignored"));
}
