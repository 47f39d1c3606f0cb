//! The figures every provider is measured on, whatever its language: trivial runs, the binding
//! round trip, fan-out, idle memory, approvals and replay, and (TypeScript) the web platform's
//! globals. Also the timed-run loops ([`runs`], [`trivial_runs`]) the other figures reuse, so
//! every figure warms up and pauses the same way.

use std::sync::Arc;
use std::time::{Duration, Instant};

use code_runtime::json;
use code_runtime::json::JsonValue;
use code_runtime::{
    ApprovalRule, Approvals, CheckpointKey, CodeBindingNamespace, CodeRunRequest, CodeRuntime,
    Decision, Decisions, Language, binding,
};
use futures::future::join_all;

use crate::bench::memory::idle_memory;
use crate::bench::{ms, percentiles};

/// The provider figures: trivial run, binding round trip, fan-out, idle memory.
pub(super) async fn measure(
    runtime: &Arc<dyn CodeRuntime>,
    samples: usize,
    quick: bool,
) -> JsonValue {
    let (p50, p99) = trivial_runs(runtime, samples, Duration::ZERO).await;

    let echo = CodeBindingNamespace::new("tools")
        .function("echo", binding(|args| async move { Ok(args.into()) }));
    let loop_program = match runtime.language() {
        Language::Python => "for i in range(1000):\n    await tools.echo(i)",
        _ => "for (let i = 0; i < 1000; i++) await tools.echo(i);",
    };
    let mut per_call = Vec::new();
    for _ in 0..if quick { 3 } else { 10 } {
        let start = Instant::now();
        let _ = runtime.run(CodeRunRequest::new(loop_program).binding(echo.clone())).await;
        per_call.push(start.elapsed().saturating_sub(p50) / 1000);
    }
    let (rtt, _) = percentiles(&mut per_call);

    let fanout = match runtime.language() {
        Language::Python => {
            "calls = [tools.echo(i) for i in range(20)]\nreturn sum([await call for call in calls])"
        }
        _ => {
            "return (await Promise.all(Array.from({ length: 20 }, (_, i) => tools.echo(i)))).reduce((a, b) => a + b, 0)"
        }
    };
    let start = Instant::now();
    let results =
        join_all((0..100).map(|_| runtime.run(CodeRunRequest::new(fanout).binding(echo.clone()))))
            .await;
    let seconds = start.elapsed().as_secs_f64();
    let ok = results
        .iter()
        .filter(|result| result.as_ref().is_ok_and(|r| r.value() == Some(&json!(190))))
        .count();

    let (approval, replay) = approval_figures(runtime, p50, quick).await;
    let web = web_figures(runtime).await;
    json!({
        "web_platform": web,
        "trivial_run_ms": {"p50": ms(p50), "p99": ms(p99), "n": samples},
        "binding_rtt_us": {"p50": rtt.as_secs_f64() * 1e6, "n": per_call.len() * 1000},
        "fanout_100x20": {"ok": ok, "failed": 100 - ok, "seconds": seconds},
        "idle_run_rss_mb": idle_memory(runtime).await,
        "approval_overhead_us": approval,
        "replay_per_call_us": replay,
    })
}

/// The web platform's globals in a TypeScript run (bar: a `new URL()` or a 1 KB encode under
/// 10 us), each timed by the program itself over 10 000 operations (`performance.now()`), so a
/// run's start is not in them; and what a run's first touch of them costs (the glue compiled),
/// the p50 of runs that touch one less the p50 of runs that do not. `null` for Python.
async fn web_figures(runtime: &Arc<dyn CodeRuntime>) -> JsonValue {
    if runtime.language() == "python" {
        return JsonValue::Null;
    }
    let timed = |program: &'static str| async move {
        let mut each = Vec::new();
        for _ in 0..5 {
            let result = runtime.run(CodeRunRequest::new(program)).await;
            if let Some(us) =
                result.ok().and_then(|result| result.value().and_then(JsonValue::as_f64))
            {
                each.push(us);
            }
        }
        each.sort_by(f64::total_cmp);
        each.get(each.len() / 2).copied().map_or(JsonValue::Null, |us| json!(us))
    };
    let url = timed("const t = performance.now(); let n = 0; for (let i = 0; i < 10000; i++) n += new URL('https://example.com/a/b?q=' + i + '#f').pathname.length; return (performance.now() - t) * 1000 / 10000").await;
    let encode = timed("const e = new TextEncoder(); const s = 'x'.repeat(1023) + 'é'; const t = performance.now(); let n = 0; for (let i = 0; i < 10000; i++) n += e.encode(s).length; return (performance.now() - t) * 1000 / 10000").await;
    // `await` included: a digest is a promise, as in every program that takes one.
    let digest = timed("const s = crypto.subtle; const d = new Uint8Array(1024).fill(7); await s.digest('SHA-256', d); const t = performance.now(); let n = 0; for (let i = 0; i < 10000; i++) n += (await s.digest('SHA-256', d)).byteLength; return (performance.now() - t) * 1000 / 10000").await;
    let runs = |program: &'static str| async move {
        let mut times = Vec::new();
        for _ in 0..30 {
            let start = Instant::now();
            let _ = runtime.run(CodeRunRequest::new(program)).await;
            times.push(start.elapsed());
        }
        percentiles(&mut times).0
    };
    let untouched = runs("return 1").await;
    let touched = runs("return typeof URL").await;
    let first_touch = touched.as_secs_f64() * 1e3 - untouched.as_secs_f64() * 1e3;
    json!({"url_parse_us": url, "text_encode_1kb_us": encode, "digest_1kb_us": digest, "first_touch_ms": first_touch, "bar_us": 10})
}

/// How many calls the approval figures make per run.
const CALLS: u32 = 1000;

/// What approvals cost: a call that needs approval, its approver allowing at once, over a plain
/// call (`approval_overhead_us`, bar 50: the runs' difference per call, signed, so noise shows
/// as noise); and a resume replaying 1 000 recorded calls, per replayed call
/// (`replay_per_call_us`, bar 20: the run's time less a trivial run's).
async fn approval_figures(
    runtime: &Arc<dyn CodeRuntime>,
    trivial: Duration,
    quick: bool,
) -> (JsonValue, JsonValue) {
    let echo = binding(|args| async move { Ok(args.into()) });
    let tools = |rule: Option<ApprovalRule>| {
        let marked = match rule {
            Some(rule) => echo.clone().approval(rule),
            None => echo.clone(),
        };
        CodeBindingNamespace::new("tools")
            .function("echo", marked)
            .function("gate", echo.clone().approval(ApprovalRule::Always))
    };
    let (calls, gated) = match runtime.language() {
        Language::Python => (
            "for i in range(1000):\n    await tools.echo(i)",
            "for i in range(1000):\n    await tools.echo(i)\nawait tools.gate(0)",
        ),
        _ => (
            "for (let i = 0; i < 1000; i++) await tools.echo(i);",
            "for (let i = 0; i < 1000; i++) await tools.echo(i); await tools.gate(0);",
        ),
    };
    let timed = |request: CodeRunRequest| async move {
        let start = Instant::now();
        let result = runtime.run(request).await;
        (start.elapsed(), result.ok())
    };
    let per_call_us = |time: Duration| time.as_secs_f64() * 1e6 / f64::from(CALLS);
    let rounds = if quick { 5 } else { 15 };
    let (mut overhead, mut replay) = (Vec::new(), Vec::new());
    let Ok(key) = CheckpointKey::generate() else { return (JsonValue::Null, JsonValue::Null) };
    for _ in 0..rounds {
        let (plain, _) = timed(CodeRunRequest::new(calls).binding(tools(None))).await;
        let marked = CodeRunRequest::new(calls)
            .binding(tools(Some(ApprovalRule::Always)))
            .approvals(Approvals::new(Decision::Allow));
        let (marked, _) = timed(marked).await;
        overhead.push(per_call_us(marked) - per_call_us(plain));
        let pausing = CodeRunRequest::new(gated)
            .binding(tools(None))
            .approvals(Approvals::new(Decision::Pause).checkpoint_key(key.clone()));
        let Some(checkpoint) = timed(pausing)
            .await
            .1
            .and_then(|mut result| result.take_paused())
            .map(|paused| paused.checkpoint)
        else {
            return (JsonValue::Null, JsonValue::Null);
        };
        let decisions = Decisions::new().allow(u64::from(CALLS) + 1);
        let resume = CodeRunRequest::resuming(checkpoint, decisions)
            .binding(tools(None))
            .approvals(Approvals::new(Decision::Allow).checkpoint_key(key.clone()));
        let (resumed, _) = timed(resume).await;
        replay.push(per_call_us(resumed.saturating_sub(trivial)));
    }
    let median = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let n = rounds * CALLS as usize;
    (
        json!({"p50": median(&mut overhead), "n": n, "bar": 50}),
        json!({"p50": median(&mut replay), "n": n, "bar": 20}),
    )
}

/// The pause before each warm run: enough for the next warm cell's interpreter to start.
pub(super) const WARM_PAUSE: Duration = Duration::from_millis(50);

/// p50 and p99 of `samples` runs of `return 1`, each after `pause` (not counted).
pub(super) async fn trivial_runs(
    runtime: &Arc<dyn CodeRuntime>,
    samples: usize,
    pause: Duration,
) -> (Duration, Duration) {
    runs(runtime, "return 1", samples, pause).await
}

/// p50 and p99 of `program` run `samples` times, `pause` before each, after five to warm up.
pub(super) async fn runs(
    runtime: &Arc<dyn CodeRuntime>,
    program: &str,
    samples: usize,
    pause: Duration,
) -> (Duration, Duration) {
    for _ in 0..5 {
        let _ = runtime.run(CodeRunRequest::new(program)).await;
    }
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        // Not `sleep(ZERO)`: tokio's timer rounds a deadline up to its next millisecond tick, so
        // runs "back to back" would each come a millisecond or so after the last one ended, time
        // in which the providers' spares get ahead (a host that runs back to back gets no such
        // pause; `python -m code_runtime.bench` compares against these figures).
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
        let start = Instant::now();
        let result = runtime.run(CodeRunRequest::new(program)).await;
        times.push(start.elapsed());
        assert!(result.is_ok_and(|r| r.is_ok()), "a run of the bench failed: {program}");
    }
    percentiles(&mut times)
}
