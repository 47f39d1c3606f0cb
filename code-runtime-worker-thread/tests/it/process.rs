//! `process` isolation: every run's isolate in a sandbox cell of its own. The contract is the
//! same as in-process (these tests sample it, `attacks.rs` runs its attacks in both modes); what
//! differs is what a V8 fatal error ends and what the budgets count.

use code_runtime::FailureKind;
use code_runtime::json;
use code_runtime_worker_thread::{Isolation, WorkerThreadError};

use crate::*;

#[test]
fn a_program_runs_in_a_cell_with_its_bindings_logs_errors_and_timers() {
    let runtime = process_runtime(Limits::default());
    assert_eq!(runtime.isolation(), "process");
    let containment = runtime.containment().expect("process isolation has a containment");
    assert!(containment.seccomp && containment.no_privileges, "{containment:?}");
    let request = CodeRunRequest::new(
        "console.log('start', 1); const r = await tools.echo({ q: [1, 'x'], n: null });\n\
         try { await tools.reject(1) } catch (e) { console.log(e instanceof ToolCallError, e.message, e.toolName) }\n\
         await new Promise(resolve => setTimeout(resolve, 5));\n\
         return r",
    )
    .binding(tools().function("echo", echo()).function("reject", reject("nope")));
    let result = run_on(&runtime, request);
    assert_eq!(
        result.to_json(),
        r#"{"logs":["start 1","true nope reject"],"value":{"q":[1,"x"],"n":null}}"#
    );
    // Rejections carry their data; `undefined` is no value.
    let request =
        CodeRunRequest::new("try { await tools.fail() } catch (e) { return [e.data, e.message] }")
            .binding(tools().function(
                "fail",
                binding(|_| async {
                    Err(BindingError::new("busy").with_data(json!({"retryAfterMs": 5})))
                }),
            ));
    assert_eq!(value(&run_on(&runtime, request)), &json!([{"retryAfterMs": 5}, "busy"]));
    let result = run_on(&runtime, CodeRunRequest::new("console.log('only a log')"));
    assert_eq!(result.to_json(), r#"{"logs":["only a log"]}"#);
}

/// A cell whose program waits gives back what it no longer uses (a full collection of a small
/// heap, the allocator's free pages, its thread's stack below the loop that waits): what the
/// program holds comes through whole, and the stack serves a deep recursion again.
#[test]
fn a_cell_gives_back_what_its_waiting_run_does_not_use_and_the_run_goes_on_whole() {
    let runtime = process_runtime(Limits::default());
    // Longer than the loop's poll (10 ms), so the cell is idle while the call waits.
    let slow = binding(|args| async move {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        Ok(args.into_value())
    });
    let program = "\
        const kept = new Map(); for (let i = 0; i < 2000; i++) kept.set('k' + i, { i, s: 'v'.repeat(i % 50) });\n\
        const weak = new WeakRef(kept);\n\
        const back = await tools.slow({ n: 1 });\n\
        const depth = (n) => n === 0 ? 0 : 1 + depth(n - 1);\n\
        let sum = 0; for (const [, v] of kept) sum += v.i + v.s.length;\n\
        return [back, kept.size, sum, weak.deref() === kept, depth(5000)]";
    let request = CodeRunRequest::new(program).binding(tools().function("slow", slow));
    let expected: u64 = (0..2000u64).map(|i| i + i % 50).sum();
    assert_eq!(value(&run_on(&runtime, request)), &json!([{"n": 1}, 2000, expected, true, 5000]));
}

/// The C heap's pages that hold only zeros go back to the system once the run waits (V8 fills
/// its tables and caches with zeros, and so may a program): pages its program zeroed among them,
/// which read as zeros after and take writes again; pages beside them that hold data keep it.
#[test]
fn a_waiting_cell_gives_back_its_pages_of_zeros_and_they_read_as_zeros_after() {
    let executable = OwnExecutable::new("zeros-test");
    let runtime = executable.runtime();
    let path = executable.0.clone();
    // Once the cell is idle (its loop polls every 10 ms), the C heap of each of the test
    // executable's cell programs: this run's and the spares'.
    let look = binding(move |_| {
        let path = path.clone();
        async move {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            let heaps: Vec<u64> = processes_of(&path)
                .iter()
                .filter(|pid| {
                    argv_of(pid)
                        .is_some_and(|argv| argv.get(1).map(String::as_str) != Some(SPAWNER_ARG))
                })
                .filter_map(|pid| {
                    mapped_kb(pid, "Private_Dirty:", |perms, path| {
                        perms == "rw-p" && path == "[heap]"
                    })
                })
                .collect();
            Ok(json!(heaps))
        }
    });
    // 1 MB of the C heap written and zeroed again (ArrayBuffers of 16 kB are the allocator's,
    // in its heap), and 256 kB beside them holding a byte every 1000: the heap stays under the
    // 4 MB past which a cell does not look for zeros.
    let program = "\
        const zeroed = Array.from({ length: 64 }, () => new Uint8Array(16384).fill(7).fill(0));\n\
        const kept = Array.from({ length: 16 }, (_, n) => { const b = new Uint8Array(16384); for (let i = 0; i < b.length; i += 1000) b[i] = 1 + (n + i) % 251; return b; });\n\
        const heaps = await tools.look({});\n\
        const zeros = zeroed.every(b => b.every(x => x === 0));\n\
        const intact = kept.every((b, n) => b.every((x, i) => x === (i % 1000 === 0 ? 1 + (n + i) % 251 : 0)));\n\
        zeroed.forEach((b, n) => b.fill(n + 1));\n\
        const written = zeroed.every((b, n) => b[0] === n + 1 && b[16383] === n + 1);\n\
        return [heaps, zeros, intact, written]";
    let request = CodeRunRequest::new(program).binding(tools().function("look", look));
    let result = run_on(&runtime, request);
    let seen = value(&result);
    assert_eq!(seen.as_array().unwrap()[1..], [json!(true), json!(true), json!(true)], "{seen}");
    // The run's cell holds the largest heap of them; with its 1 MB of zeros it would hold 2 MB
    // or more (measured: 2.1; a waiting cell's own is 0.7 to 0.9 MB).
    let heaps = seen[0].as_array().unwrap();
    let largest = heaps.iter().filter_map(JsonValue::as_u64).max();
    assert!(largest.is_some_and(|kb| kb < 1600), "{seen}");
    tokio().block_on(runtime.dispose());
}

#[test]
fn runs_in_cells_at_once_each_get_their_own() {
    let runtime = process_runtime(Limits::default());
    let runs = (0..6).map(|n| {
        runtime.run(
            CodeRunRequest::new(format!(
                "await new Promise(r => setTimeout(r, 20)); globalThis.seen = (globalThis.seen ?? 0) + 1; return [{n}, globalThis.seen]"
            )),
        )
    });
    let results = tokio().block_on(futures::future::join_all(runs));
    for (n, result) in results.into_iter().enumerate() {
        assert_eq!(value(&result.unwrap()), &json!([n, 1]));
    }
}

#[test]
fn budgets_end_a_cell_as_they_end_a_thread() {
    let runtime = process_runtime(Limits {
        compute_ms: 300,
        max_wall_ms: 5_000,
        max_output_bytes: 1_000,
        ..Limits::default()
    });
    for (program, kind, message) in [
        ("for (;;) {}", FailureKind::Timeout, "compute budget exhausted (300ms"),
        (
            "await new Promise(() => {})",
            FailureKind::Timeout,
            "wall-clock ceiling reached (5000ms)",
        ),
        ("for (;;) console.log('x'.repeat(100))", FailureKind::OutputLimit, ""),
        ("return 'x'.repeat(2000)", FailureKind::OutputLimit, ""),
    ] {
        let result = run_on(&runtime, CodeRunRequest::new(program));
        let error = result.error().unwrap_or_else(|| panic!("{program}: {}", result.to_json()));
        assert_eq!(error.kind(), kind, "{program}: {}", result.to_json());
        assert!(error.message().contains(message), "{program}: {}", error.message());
    }
    // The output before the stop is kept.
    let result = run_on(&runtime, CodeRunRequest::new("console.log('before'); for (;;) {}"));
    assert_eq!(result.logs(), ["before"]);
}

#[test]
fn a_v8_fatal_error_ends_the_run_as_worker_exit_saying_so_and_the_next_runs() {
    // An array longer than V8's longest is a fatal "invalid size" error V8 cannot survive (it
    // crashes without calling any handler); in-process it would end the host.
    let runtime = process_runtime(Limits { max_memory_mb: 512, ..Limits::default() });
    let before = rss_mib();
    for program in ["'x'.repeat(2 ** 28).split('')", "'x'.repeat(2 ** 28).match(/x/g)"] {
        let result = run_on(&runtime, CodeRunRequest::new(program));
        let (kind, message) = failure(&result).unwrap_or_default();
        assert_eq!(kind, "worker-exit", "{program}: {message}");
        assert!(
            message.starts_with(
                "worker error: V8 fatal error: Fatal JavaScript invalid size error 268435456"
            ),
            "{program}: {message}"
        );
        assert_eq!(value(&run_on(&runtime, CodeRunRequest::new("return 2"))), &json!(2));
    }
    assert!(rss_mib() < before + 256, "the host grew by {} MiB", rss_mib() - before);
}

#[test]
fn memory_attacks_end_the_cell_never_the_host() {
    // Each of these took the in-process host down, past its budget, or both.
    let limits = Limits { max_memory_mb: 64, max_wall_ms: 20_000, ..Limits::default() };
    let runtime = process_runtime(limits);
    let before = rss_mib();
    for program in [
        "'x'.repeat(2 ** 28).split('')",
        "'x'.repeat(2 ** 28).match(/x/g)",
        "JSON.parse('[' + '0,'.repeat(2 ** 27) + '0]')",
        // Flat strings (`repeat` alone makes a rope of a few nodes).
        "const s = []; for (let i = 0; i < 8; i++) s.push(String.fromCharCode(97 + i).repeat(2 ** 28).toUpperCase()); return s.length",
        "return 'x'.repeat(2 ** 28).toUpperCase().length",
        "Array(2 ** 32 - 1).fill(0)",
    ] {
        let result = run_on(&runtime, CodeRunRequest::new(program));
        let (kind, message) = failure(&result).unwrap_or_default();
        assert!(
            kind == "worker-exit" || (kind == "exception" && message.starts_with("RangeError")),
            "{program}: {}",
            result.to_json()
        );
        assert_eq!(value(&run_on(&runtime, CodeRunRequest::new("return 3"))), &json!(3));
    }
    assert!(rss_mib() < before + 256, "the host grew by {} MiB", rss_mib() - before);
}

#[test]
fn webassembly_memory_is_inside_the_cells_budget_when_allowed() {
    let runtime = WorkerThreadCodeRuntime::new(WorkerThreadConfig {
        limits: Limits { max_memory_mb: 64, ..Limits::default() },
        allow_wasm: true,
        isolation: Isolation::Process,
        cell_executable: Some(env!("CARGO_BIN_EXE_code-runtime-v8-cell").into()),
        ..WorkerThreadConfig::default()
    })
    .unwrap();
    // 1 GiB of pages V8 maps itself, outside the ArrayBuffer allocator, all touched.
    let program = "const m = new WebAssembly.Memory({ initial: 16384 }); new Uint8Array(m.buffer).fill(1); return m.buffer.byteLength";
    let result = run_on(&runtime, CodeRunRequest::new(program));
    let (kind, message) = failure(&result).unwrap_or_default();
    assert_eq!(kind, "worker-exit", "{}", result.to_json());
    assert!(message.contains("64 MB memory budget"), "{message}");
}

#[test]
fn an_executable_that_does_not_serve_cells_is_refused_at_construction() {
    for executable in ["/bin/true", "/bin/sleep", "/nonexistent/cell"] {
        let error = WorkerThreadCodeRuntime::new(WorkerThreadConfig {
            isolation: Isolation::Process,
            cell_executable: Some(executable.into()),
            ..WorkerThreadConfig::default()
        })
        .unwrap_err();
        assert!(matches!(error, WorkerThreadError::Cell { .. }), "{error}");
        assert!(error.to_string().contains(executable), "{error}");
    }
}

#[test]
fn a_disposed_runtime_ends_its_spare_cell_and_refuses_runs() {
    let runtime = process_runtime(Limits::default());
    assert_eq!(value(&run_on(&runtime, CodeRunRequest::new("return 1"))), &json!(1));
    tokio().block_on(runtime.dispose());
    let refused = tokio().block_on(runtime.run(CodeRunRequest::new("return 1")));
    assert!(matches!(refused, Err(code_runtime::ContractError::Disposed)), "{refused:?}");
}

/// The processes whose command line names `executable`.
fn processes_of(executable: &std::path::Path) -> Vec<String> {
    let wanted = executable.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|entry| {
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let argv0 = cmdline.split(|&byte| byte == 0).next()?;
            (argv0 == wanted.as_bytes()).then(|| entry.file_name().to_string_lossy().into_owned())
        })
        .collect()
}

#[test]
fn no_cell_outlives_its_runtime() {
    // A name of the cell executable only this test uses, so cells of tests running beside it do
    // not count.
    let original = env!("CARGO_BIN_EXE_code-runtime-v8-cell");
    let executable =
        std::env::temp_dir().join(format!("code-runtime-v8-cell-leak-test-{}", std::process::id()));
    let _ = std::fs::remove_file(&executable);
    // A link where the file system allows one (an unprivileged user may not link root's file).
    if std::fs::hard_link(original, &executable).is_err() {
        std::fs::copy(original, &executable).unwrap();
    }
    let runtime = WorkerThreadCodeRuntime::new(WorkerThreadConfig {
        limits: Limits { compute_ms: 300, max_wall_ms: 2_000, ..Limits::default() },
        isolation: Isolation::Process,
        cell_executable: Some(executable.clone()),
        ..WorkerThreadConfig::default()
    })
    .unwrap();
    let cancelled = code_runtime::CancellationToken::new();
    cancelled.cancel();
    for request in [
        CodeRunRequest::new("return 1"),
        CodeRunRequest::new("for (;;) {}"),
        CodeRunRequest::new("await new Promise(() => {})"),
        CodeRunRequest::new("'x'.repeat(2 ** 28).split('')"),
        CodeRunRequest::new("await tools.never()").binding(tools().function("never", never())),
        CodeRunRequest { signal: Some(cancelled.clone()), ..CodeRunRequest::new("for (;;) {}") },
    ] {
        let _ = tokio().block_on(runtime.run(request));
    }
    // A run dropped mid-flight, then disposal: every cell, spares included, is killed and reaped.
    let dropped = tokio().block_on(async {
        tokio::time::timeout(
            std::time::Duration::from_millis(200),
            runtime.run(CodeRunRequest::new("for (;;) {}")),
        )
        .await
    });
    assert!(dropped.is_err(), "the run was dropped while it ran");
    assert!(!processes_of(&executable).is_empty(), "the spares are cells of this executable");
    tokio().block_on(runtime.dispose());
    let left = processes_of(&executable);
    let _ = std::fs::remove_file(&executable);
    assert!(left.is_empty(), "cells left after dispose: {left:?}");
}

#[test]
fn a_string_flattened_past_the_budget_ends_the_cell() {
    // Under 64 MB, a 128 MiB rope flattened in one piece: V8's heap limit let it through once
    // (its one extension), and the cell's own allowance was 96 MiB. The cell is stopped now.
    let limits = Limits { max_memory_mb: 64, max_wall_ms: 30_000, ..Limits::default() };
    let runtime = process_runtime(limits);
    let program = "let s = 'x'.repeat(1 << 20); for (let i = 0; i < 7; i++) s = s + s; return [s.length, s.indexOf('z')]";
    let result = run_on(&runtime, CodeRunRequest::new(program));
    let (kind, message) = failure(&result).unwrap_or_default();
    assert_eq!(kind, "worker-exit", "{}", result.to_json());
    assert!(message.contains("memory"), "{message}");
    assert_eq!(value(&run_on(&runtime, CodeRunRequest::new("return 1"))), &json!(1));
}

/// A copy (or link) of the cell executable under a name only the calling test uses, so that
/// processes of tests running beside it do not count; removed on drop.
struct OwnExecutable(std::path::PathBuf);

impl OwnExecutable {
    fn new(purpose: &str) -> Self {
        let original = env!("CARGO_BIN_EXE_code-runtime-v8-cell");
        let path = std::env::temp_dir()
            .join(format!("code-runtime-v8-cell-{purpose}-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        // A link where the file system allows one (an unprivileged user may not link root's file).
        if std::fs::hard_link(original, &path).is_err() {
            std::fs::copy(original, &path).unwrap();
        }
        Self(path)
    }

    /// A runtime of `process` isolation whose cells run this executable.
    fn runtime(&self) -> WorkerThreadCodeRuntime {
        WorkerThreadCodeRuntime::new(WorkerThreadConfig {
            isolation: Isolation::Process,
            cell_executable: Some(self.0.clone()),
            ..WorkerThreadConfig::default()
        })
        .unwrap()
    }
}

impl Drop for OwnExecutable {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The argument vector of `pid`, if it still runs.
fn argv_of(pid: &str) -> Option<Vec<String>> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        cmdline
            .split(|&byte| byte == 0)
            .filter(|arg| !arg.is_empty())
            .map(|arg| String::from_utf8_lossy(arg).into_owned())
            .collect(),
    )
}

/// The parent of `pid`.
fn parent_of(pid: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| line.strip_prefix("PPid:")).map(|ppid| ppid.trim().to_owned())
}

/// The spawner processes among the processes of `executable`, and its cells' programs.
fn spawners_and_programs(executable: &std::path::Path) -> (Vec<String>, Vec<String>) {
    processes_of(executable).into_iter().partition(|pid| {
        argv_of(pid).is_some_and(|argv| argv.get(1).map(String::as_str) == Some(SPAWNER_ARG))
    })
}

const SPAWNER_ARG: &str = "--code-runtime-cell-spawner";

#[test]
fn cells_start_from_a_spawner_process_which_a_killed_one_is_replaced_by_and_which_ends_with_the_runtime()
 {
    let executable = OwnExecutable::new("spawner-test");
    let runtime = executable.runtime();
    // The first cells start in the host while the spawner process gets ready; the spares made
    // after it are its.
    for _ in 0..6 {
        assert_eq!(value(&run_on(&runtime, CodeRunRequest::new("return 1"))), &json!(1));
    }
    // One spawner process. (On a loaded machine one may have been replaced, when a cell took
    // longer than it may to start; the one it replaced is killed and reaped, which a process
    // of V8's reservations takes a moment to finish: so its count is read until it settles.)
    let settled = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let spawners = loop {
        let (spawners, _) = spawners_and_programs(&executable.0);
        if spawners.len() == 1 || std::time::Instant::now() > settled {
            break spawners;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(spawners.len(), 1, "one spawner process: {spawners:?}");
    let spawner = spawners[0].clone();
    assert_eq!(parent_of(&spawner), Some(std::process::id().to_string()));
    // It has nothing of the host's environment (its cells' inits are copies of its memory).
    let environ = std::fs::read(format!("/proc/{spawner}/environ")).unwrap();
    assert!(environ.is_empty(), "{}", String::from_utf8_lossy(&environ));
    // Seen from the host while a run waits on a call: every cell's program (this run's and the
    // spares) is the child of an init that is the spawner process's child, not the host's.
    let path = executable.0.clone();
    let seen = binding(move |_| {
        let (_, programs) = spawners_and_programs(&path);
        let grandparents: Vec<Option<String>> =
            programs.iter().map(|pid| parent_of(pid).and_then(|init| parent_of(&init))).collect();
        async move { Ok(json!({"programs": programs.len(), "grandparents": grandparents})) }
    });
    let result = run_on(
        &runtime,
        CodeRunRequest::new("return await tools.seen()").binding(tools().function("seen", seen)),
    );
    let seen = value(&result);
    assert!(seen["programs"].as_u64().unwrap() >= 1, "{seen}");
    for grandparent in seen["grandparents"].as_array().unwrap() {
        assert_eq!(grandparent, &json!(spawner), "{seen}");
    }
    // Killed under a run: that run ends (its cell died with the spawner process), later runs go
    // on, and a new spawner process takes over; the dead one is reaped.
    let victim = spawner.clone();
    let kill = binding(move |_| {
        let pid: libc::pid_t = victim.parse().unwrap();
        // SAFETY: kill(2) on a child of this process that is not reaped yet (the runtime
        // reaps it only once it finds it gone).
        unsafe { libc::kill(pid, libc::SIGKILL) };
        async move { Ok(json!(null)) }
    });
    let killed = run_on(
        &runtime,
        CodeRunRequest::new(
            "await tools.kill(); await new Promise(r => setTimeout(r, 200)); return 1",
        )
        .binding(tools().function("kill", kill)),
    );
    assert_eq!(failure(&killed).map(|(kind, _)| kind), Some("worker-exit"), "{}", killed.to_json());
    let mut replaced = None;
    for _ in 0..20 {
        let result = run_on(&runtime, CodeRunRequest::new("return 2"));
        let (spawners, _) = spawners_and_programs(&executable.0);
        if let Some(new) = spawners.iter().find(|pid| **pid != spawner) {
            if result.error().is_none() {
                replaced = Some(new.clone());
                break;
            }
        }
    }
    let replaced = replaced.expect("a new spawner process, and runs that succeed");
    // Reaped off the spawner thread, as the host found it gone.
    let reaped = (0..200).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        std::fs::metadata(format!("/proc/{spawner}")).is_err()
    });
    assert!(reaped, "the killed spawner process is reaped");
    assert_eq!(value(&run_on(&runtime, CodeRunRequest::new("return 3"))), &json!(3));
    // Disposal ends the spawner process and its cells, and reaps them.
    tokio().block_on(runtime.dispose());
    let left = processes_of(&executable.0);
    assert!(left.is_empty(), "left after dispose (the spawner was {replaced}): {left:?}");
}

/// The kB of `field` (`Private_Dirty`, say) in `pid`'s mappings of `file` that are read-only and
/// dirty: an executable's relocated data, which the dynamic loader wrote and then protected.
/// `None` when the map is closed to this process.
fn relocated_kb(pid: &str, file: &std::path::Path, field: &str) -> Option<u64> {
    let wanted = file.to_string_lossy().into_owned();
    mapped_kb(pid, field, |perms, path| perms == "r--p" && path == wanted)
}

/// The kB of `field` in `pid`'s mappings whose permissions and path `wanted` accepts; `None` when
/// the map is closed to this process.
fn mapped_kb(pid: &str, field: &str, wanted: impl Fn(&str, &str) -> bool) -> Option<u64> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
    let mut total = 0;
    let mut counted = false;
    for line in smaps.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.first().is_some_and(|range| range.contains('-') && !range.ends_with(':')) {
            let path = if fields.len() > 5 { fields[5..].join(" ") } else { String::new() };
            counted = wanted(fields.get(1).copied().unwrap_or_default(), &path);
        } else if counted && fields.first() == Some(&field) {
            total += fields[1].parse::<u64>().ok()?;
        }
    }
    Some(total)
}

/// The names of `pid`'s threads, sorted; `None` once it ended.
fn threads_of(pid: &str) -> Option<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect();
    names.sort();
    Some(names)
}

/// The 16 bytes `AT_RANDOM` points at in `pid` (from which the C library drew its canary and
/// pointer guard), in hexadecimal; `None` when its memory is closed to this process.
fn at_random(pid: &str) -> Option<String> {
    use std::io::{Read as _, Seek as _};
    let auxv = std::fs::read(format!("/proc/{pid}/auxv")).ok()?;
    let words: Vec<u64> = auxv
        .chunks_exact(8)
        .map(|word| u64::from_ne_bytes(word.try_into().expect("8 bytes")))
        .collect();
    let address = words.chunks_exact(2).find(|pair| pair[0] == libc::AT_RANDOM)?[1];
    let mut mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    mem.seek(std::io::SeekFrom::Start(address)).ok()?;
    let mut bytes = [0u8; 16];
    mem.read_exact(&mut bytes).ok()?;
    Some(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// The start addresses of `pid`'s anonymous mappings of 1 GiB or more: V8's reservations (its
/// heap's cage, its code range), which a cell makes after it starts; `None` when the map is
/// closed to this process.
fn large_reservations(pid: &str) -> Option<Vec<u64>> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let starts = maps
        .lines()
        .filter(|line| line.split_whitespace().nth(5).is_none())
        .filter_map(|line| {
            let (start, end) = line.split_whitespace().next()?.split_once('-')?;
            let (start, end) =
                (u64::from_str_radix(start, 16).ok()?, u64::from_str_radix(end, 16).ok()?);
            (end - start >= 1 << 30).then_some(start)
        })
        .collect();
    Some(starts)
}

#[test]
fn a_spawner_process_cell_is_a_copy_of_it_that_shares_its_relocated_pages_and_draws_its_own_reservations()
 {
    let executable = OwnExecutable::new("copy-test");
    let runtime = executable.runtime();
    // The first cells start in the host while the spawner process gets ready.
    let ready = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while spawners_and_programs(&executable.0).0.is_empty() && std::time::Instant::now() < ready {
        assert_eq!(value(&run_on(&runtime, CodeRunRequest::new("return 1"))), &json!(1));
    }
    for _ in 0..4 {
        assert_eq!(value(&run_on(&runtime, CodeRunRequest::new("return 1"))), &json!(1));
    }
    // Two runs wait on a call at once; the second's call looks at both cells' programs (and the
    // spares) while they run.
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    let waiting = gate.clone();
    let path = executable.0.clone();
    let look = binding(move |args| {
        let first = args.into_value() == json!(1);
        let gate = waiting.clone();
        let path = path.clone();
        async move {
            if first {
                // Bounded: a second run that failed before it looked must not hang this test.
                let wait = std::time::Duration::from_secs(30);
                let _ = tokio::time::timeout(wait, gate.notified()).await;
                return Ok(json!(null));
            }
            let (spawners, programs) = spawners_and_programs(&path);
            let spawner = spawners.first().cloned().unwrap_or_default();
            let copies: Vec<&String> = programs
                .iter()
                .filter(|pid| {
                    parent_of(pid).and_then(|init| parent_of(&init)).as_ref() == Some(&spawner)
                })
                .collect();
            let seen: Vec<_> = copies
                .iter()
                .map(|pid| {
                    json!({
                        "argv": argv_of(pid),
                        "private": relocated_kb(pid, &path, "Private_Dirty:"),
                        "shared": relocated_kb(pid, &path, "Shared_Dirty:"),
                        "reservations": large_reservations(pid),
                        "threads": threads_of(pid),
                        "random": at_random(pid),
                    })
                })
                .collect();
            // A permit, should the first run's call come after this.
            gate.notify_one();
            Ok(json!({
                "spawner_private": relocated_kb(&spawner, &path, "Private_Dirty:"),
                "spawner_random": at_random(&spawner),
                "copies": seen,
            }))
        }
    });
    let namespace = tools().function("look", look);
    let program = "const seen = await tools.look(ARG); return [seen, Math.random()]";
    let runs = [1, 2].map(|n| {
        runtime.run(
            CodeRunRequest::new(program.replace("ARG", &n.to_string())).binding(namespace.clone()),
        )
    });
    let [first, second] = tokio().block_on(futures::future::join_all(runs)).try_into().unwrap();
    let (first, second) = (first.unwrap(), second.unwrap());
    let seen = &value(&second)[0];
    let copies = seen["copies"].as_array().unwrap();
    // Both runs' programs, and at least one spare.
    assert!(copies.len() >= 2, "{seen}");
    let cell_argv = json!([executable.0.to_string_lossy(), "--code-runtime-v8-cell"]);
    let mut reservations = Vec::new();
    let mut randoms = vec![seen["spawner_random"].clone()];
    assert!(randoms[0].is_string(), "{seen}");
    for copy in copies {
        // It reads as the cell `exec` would have started.
        assert_eq!(copy["argv"], cell_argv, "{seen}");
        // The host reads its memory map, as the memory budget does (an unprivileged host too).
        let (Some(private), Some(shared)) = (copy["private"].as_u64(), copy["shared"].as_u64())
        else {
            panic!("the host cannot read the memory map of a cell's program: {seen}");
        };
        // The pages the dynamic loader wrote (hundreds of kB of a V8 executable's) are the
        // spawner's, shared: a fresh `exec` would have written its own, all of them private.
        // Only a few are the copy's own: V8 protects its flags read-only once it set them.
        assert!(private <= 16 && shared >= 256, "{seen}");
        // Two threads, whatever the machine: the isolate's, where V8 runs single-threaded (a
        // worker pool of V8's choosing would add one per processor but one), and the main
        // thread, which waits for it (named after the executable, cut to 15 bytes as well).
        assert_eq!(copy["threads"], json!(["code-runtime-v8", "code-runtime-v8"]), "{seen}");
        // Its secrets of the C library are its own (`code-runtime-sandbox/src/reseed.rs`): the
        // `AT_RANDOM` bytes, drawn with the canary and the pointer guard, differ from the
        // spawner's and each other's.
        assert!(copy["random"].is_string(), "{seen}");
        randoms.push(copy["random"].clone());
        let own = copy["reservations"].as_array().unwrap();
        assert!(!own.is_empty(), "{seen}");
        reservations.extend(own.iter().cloned());
    }
    // Each copy's V8 reserved its regions at addresses of its own: no two copies share one.
    let count = reservations.len();
    reservations.sort_by_key(|start| start.as_u64());
    reservations.dedup();
    assert_eq!(reservations.len(), count, "{seen}");
    let count = randoms.len();
    randoms.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
    randoms.dedup();
    assert_eq!(randoms.len(), count, "{seen}");
    // Nor their randomness.
    assert_ne!(value(&first)[1], value(&second)[1]);
    tokio().block_on(runtime.dispose());
}
