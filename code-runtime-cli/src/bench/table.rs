//! The report as a table (without `--json`): one block of lines per language, its bars beside
//! its figures, then the baselines and the ratios. Reads the JSON report only, so what is
//! printed and what `--json` gives cannot disagree.

use code_runtime::json::JsonValue;

/// The web platform's line of a TypeScript table (measured by `web_figures`, in `figures.rs`).
fn web_line(out: &mut String, figures: &JsonValue) {
    let Some(web) = figures.get("web_platform").filter(|web| web.get("bar_us").is_some()) else {
        return;
    };
    let number = |key: &str| web.get(key).and_then(JsonValue::as_f64).unwrap_or(f64::NAN);
    out.push_str(&format!(
        "  web: new URL()     {:>8.2} us   1 KB encode {:>6.2} us   1 KB SHA-256 digest {:>6.2} us   (bar < 10 us); first touch +{:.2} ms\n",
        number("url_parse_us"),
        number("text_encode_1kb_us"),
        number("digest_1kb_us"),
        number("first_touch_ms")
    ));
}

/// The lines of one language's figures.
fn language_table(
    out: &mut String,
    report: &JsonValue,
    language: &str,
    figures: &JsonValue,
    (bar_trivial, bar_rtt): (&str, &str),
) {
    let number = |path: &[&str]| {
        path.iter()
            .try_fold(figures, |value, key| value.get(*key))
            .and_then(JsonValue::as_f64)
            .unwrap_or(f64::NAN)
    };
    out.push_str(&format!("{}\n", language.replace('_', " ")));
    out.push_str(&format!(
        "  trivial run        p50 {:>8.2} ms  p99 {:>8.2} ms   (bar {bar_trivial})\n",
        number(&["trivial_run_ms", "p50"]),
        number(&["trivial_run_ms", "p99"])
    ));
    out.push_str(&format!(
        "  binding round trip p50 {:>8.2} us                   (bar {bar_rtt})\n",
        number(&["binding_rtt_us", "p50"])
    ));
    out.push_str(&format!(
        "  100 x 20 fan-out   {} ok, {} failed, {:.2} s\n",
        number(&["fanout_100x20", "ok"]),
        number(&["fanout_100x20", "failed"]),
        number(&["fanout_100x20", "seconds"])
    ));
    out.push_str(&format!(
        "  idle live run      {:>8.2} MB   (the whole process tree, per run waiting on a call)\n",
        number(&["idle_run_rss_mb"])
    ));
    out.push_str(&format!(
        "  approval overhead  p50 {:>8.2} us                   (bar <= 50 us, approver allowing at once)\n",
        number(&["approval_overhead_us", "p50"])
    ));
    out.push_str(&format!(
        "  replayed call      p50 {:>8.2} us                   (bar <= 20 us, a resume of 1 000)\n",
        number(&["replay_per_call_us", "p50"])
    ));
    web_line(out, figures);
    for (key, label, note) in [
        ("trivial_run_warm_ms", "warm cell run", "(started ahead, 50 ms apart)"),
        ("trivial_run_scratch_ms", "from scratch", "(a cell started per run, no zygote)"),
        ("trivial_run_forked_ms", "forked at start", "(a zygote fork per run, none ahead)"),
        (
            "trivial_run_in_host_ms",
            "cells from host",
            "(started by the host itself, no spawner process)",
        ),
    ] {
        if figures.get(key).is_some() {
            out.push_str(&format!(
                "  {label:<19}p50 {:>8.2} ms  p99 {:>8.2} ms   {note}\n",
                number(&[key, "p50"]),
                number(&[key, "p99"])
            ));
        }
    }
    python_lines(out, figures);
    if let Some(layers) = figures.get("sandbox_layers_ms").and_then(JsonValue::as_object) {
        let listed: Vec<String> = layers
            .iter()
            .map(|(name, figure)| match figure["p50"].as_f64() {
                Some(p50) => format!("{name} {p50:.2}"),
                None => format!("{name} n/a"),
            })
            .collect();
        out.push_str(&format!("  cold start, layers p50 ms: {}\n", listed.join(", ")));
    }
    if let Some(p50) = report["cli_oneshot_ms"][language]["p50"].as_f64() {
        out.push_str(&format!("  one-shot CLI run   p50 {p50:>8.2} ms\n"));
    }
}

/// Python's own figures, those measured: a trivial run that imports the standard modules beside
/// a trivial run, and the wall clock under floods.
fn python_lines(out: &mut String, figures: &JsonValue) {
    let number = |value: &JsonValue| value.as_f64().unwrap_or(f64::NAN);
    let imports = &figures["import_run_ms"];
    if !imports.is_null() {
        out.push_str(&format!(
            "  import asyncio, json p50 {:>6.2} ms; + re, datetime p50 {:.2} ms, {:+.2} ms over \
             trivial {:.2} ms (bar <= 1.5 ms)\n",
            number(&imports["asyncio_json"]["p50"]),
            number(&imports["asyncio_json_re_datetime"]["p50"]),
            number(&imports["over_trivial_ms"]),
            number(&imports["trivial"]["p50"]),
        ));
    }
    let floods = &figures["wall_clock_under_floods_ms"];
    if !floods.is_null() {
        out.push_str(&format!(
            "  2 s wall clock     {:>8.0} ms while two runs send 100 MB lines  (bar <= 2500 ms)\n",
            number(&floods["ms"])
        ));
    }
}

/// The preloaded pandas figures (Python's), if measured.
fn preload_lines(out: &mut String, pandas: &JsonValue) {
    if let Some(why) = pandas["skipped"].as_str() {
        out.push_str(&format!("  preloaded pandas   not measured: {why}\n"));
        return;
    }
    let Some(p50) = pandas["dataframe_run_ms"]["p50"].as_f64() else { return };
    let number = |value: &JsonValue| value.as_f64().unwrap_or(f64::NAN);
    out.push_str(&format!(
        "  preloaded pandas   p50 {p50:>8.2} ms  {:.2}x its trivial run {:.2} ms (bar <= 2x; a 1 000-row DataFrame summed)\n",
        number(&pandas["ratio_vs_trivial"]),
        number(&pandas["trivial_run_ms"]["p50"]),
    ));
    out.push_str(&format!(
        "  idle, preloaded    {:>8.2} MB  without preload {:.2} MB (bar: within 2 MB)\n",
        number(&pandas["idle_run_rss_mb"]),
        number(&pandas["idle_run_rss_mb_without"]),
    ));
}

/// The session figures (Python's), if measured.
fn session_lines(out: &mut String, sessions: &JsonValue) {
    let number = |value: &JsonValue| value.as_f64().unwrap_or(f64::NAN);
    for (key, label, bar) in
        [("small", "session, 10 vars", "<= 1 ms"), ("numpy_10mb", "session, 10 MB np", "<= 20 ms")]
    {
        let figures = &sessions[key];
        if let Some(why) = figures["skipped"].as_str() {
            out.push_str(&format!(
                "  {label:<18} not measured: {why}
"
            ));
            continue;
        }
        if figures["session_run_ms"].is_null() {
            continue;
        }
        out.push_str(&format!(
            "  {label:<18} p50 {:>8.2} ms  {:+.2} ms over the same run in no session {:.2} ms (bar {bar})\n",
            number(&figures["session_run_ms"]["p50"]),
            number(&figures["over_plain_ms"]),
            number(&figures["plain_run_ms"]["p50"]),
        ));
    }
}

pub(super) fn table(report: &JsonValue) -> String {
    let mut out = String::new();
    for (language, bar_trivial, bar_rtt) in [
        ("typescript", "<= 3 ms", "<= 40 us"),
        ("typescript_thread", "<= 2 ms", "<= 10 us"),
        ("python", "<= 3 ms or 0.35x bare", "<= 60 us"),
    ] {
        if let Some(figures) = report.get(language) {
            language_table(&mut out, report, language, figures, (bar_trivial, bar_rtt));
            preload_lines(&mut out, &figures["preload_pandas"]);
            session_lines(&mut out, &figures["sessions"]);
        }
    }
    let baseline = |key: &str| {
        report["baselines"].get(key).and_then(|b| b.get("p50")).and_then(JsonValue::as_f64)
    };
    out.push_str("baselines\n");
    match baseline("node_worker_spawn_ms") {
        Some(node) => out
            .push_str(&format!("  node worker_threads spawn-to-first-message p50 {node:.2} ms\n")),
        None if report.get("typescript").is_some() => out.push_str("  node: not found\n"),
        None => {}
    }
    if let Some(bare) = baseline("python_bare_start_ms") {
        out.push_str(&format!("  python3 -I -S -c pass p50 {bare:.2} ms\n"));
    }
    for (key, label) in [
        ("ts_trivial_vs_node_worker", "typescript (process) trivial / node worker"),
        ("ts_thread_trivial_vs_node_worker", "typescript (thread) trivial / node worker"),
        ("py_trivial_vs_bare_python", "python trivial / bare python"),
        ("py_forked_trivial_vs_bare_python", "python forked at start / bare python"),
        ("py_scratch_trivial_vs_bare_python", "python trivial from scratch / bare python"),
        ("py_cli_oneshot_vs_bare_python", "python one-shot CLI run / bare python"),
    ] {
        if let Some(ratio) = report["ratios"].get(key).and_then(JsonValue::as_f64) {
            out.push_str(&format!("  ratio {label}: {ratio:.2}x\n"));
        }
    }
    out.trim_end().to_owned()
}
