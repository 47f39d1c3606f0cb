//! What a live run costs in memory: the proportional set of this process's whole tree, read
//! from `/proc`, before and while runs wait on a binding. Apart because it is the one figure
//! read from the kernel rather than timed.

use std::sync::Arc;
use std::time::Duration;

use code_runtime::json;
use code_runtime::{CodeBindingNamespace, CodeRunRequest, CodeRuntime, binding};

/// Memory added per live run while 20 runs wait on a binding: the proportional set of this
/// process and of every process under it, at any depth (a TypeScript cell's V8 process under its
/// init, a Python run's interpreter under its init under the zygote's cell), before and during.
/// Shared pages are divided among their sharers, so the tree's sum counts each page once. A first
/// round of the same 20 runs, not measured, grows what this process's allocator keeps once 20
/// runs have been held (and the cells made ahead): measured in the first round, it moved the
/// TypeScript figure by up to 0.7 MB between benches.
pub(super) async fn idle_memory(runtime: &Arc<dyn CodeRuntime>) -> f64 {
    waiting_runs(runtime).await;
    waiting_runs(runtime).await
}

/// One round of [`idle_memory`]: 20 runs waiting, the tree's growth per run.
async fn waiting_runs(runtime: &Arc<dyn CodeRuntime>) -> f64 {
    let gate = Arc::new(tokio::sync::Notify::new());
    let waiting = gate.clone();
    let tools = CodeBindingNamespace::new("tools").function(
        "wait",
        binding(move |_| {
            let waiting = waiting.clone();
            async move {
                waiting.notified().await;
                Ok(json!(1))
            }
        }),
    );
    let before = tree_pss_kb();
    let runs: Vec<_> = (0..20)
        .map(|_| {
            let runtime = runtime.clone();
            let request = CodeRunRequest::new("return await tools.wait({})").binding(tools.clone());
            tokio::spawn(async move { runtime.run(request).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let during = tree_pss_kb();
    gate.notify_waiters();
    for run in runs {
        let _ = run.await;
    }
    during.saturating_sub(before) as f64 / 1024.0 / 20.0
}

/// The proportional set (`Pss`, kB) of this process and all its descendants.
fn tree_pss_kb() -> u64 {
    let pss = |pid: u32| -> u64 {
        // A process gone since it was listed holds nothing.
        std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|line| line.starts_with("Pss:"))
                    .and_then(|line| line.split_whitespace().nth(1)?.parse().ok())
            })
            .unwrap_or(0)
    };
    let children = |pid: u32| -> Vec<u32> {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
            .flat_map(|list| {
                list.split_whitespace().filter_map(|pid| pid.parse().ok()).collect::<Vec<_>>()
            })
            .collect()
    };
    // A stack, not recursion: the tree's depth is the cells' to choose.
    let mut pending = vec![std::process::id()];
    let mut total = 0;
    while let Some(pid) = pending.pop() {
        total += pss(pid);
        pending.extend(children(pid));
    }
    total
}
