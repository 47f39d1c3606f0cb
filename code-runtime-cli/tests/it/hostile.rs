//! What the command line survives: files of any depth, and programs that make the host hold
//! more than their memory budget, measured from outside as the host's peak resident memory.

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;

use crate::{Scratch, binary, check_misuse, run, stderr, stdout};

/// Runs the command to its end and reports its output and its peak resident memory in MiB (the
/// command's own and its reaped children's, as the kernel keeps it for `wait4`).
#[expect(clippy::zombie_processes, reason = "reaped by `wait4`, which also gives its peak memory")]
fn run_measured(args: &[&str]) -> (std::process::Output, u64) {
    let mut child = binary()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let reading = std::thread::spawn(move || {
        use std::io::Read;
        let mut bytes = Vec::new();
        let _ = err.read_to_end(&mut bytes);
        bytes
    });
    let mut stdout = Vec::new();
    std::io::Read::read_to_end(&mut out, &mut stdout).unwrap();
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for the kernel to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: waits for our own child, with valid pointers for its status and usage.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid);
    let stderr = reading.join().unwrap();
    let status = std::process::ExitStatus::from_raw(status);
    (std::process::Output { status, stdout, stderr }, (usage.ru_maxrss as u64) / 1024)
}

/// `thread` isolation keeps its budgets past a builtin under way when its program is stopped:
/// filling an array of 2^27 - 1 elements under 64 MB, stopped by the wall clock or the compute
/// budget, and parsing a JSON text of 25 million values. The host held 2.2 GB for the first (a
/// loan of 2 GiB to let the builtin finish) and answered after 33 to 178 s; now each run ends
/// at its budget and the command's peak stays near the budget (180 MB measured, V8 included).
#[test]
fn thread_isolation_keeps_its_budgets_past_a_builtin_under_way() {
    let scratch = Scratch::new("thread-budgets");
    let fill = scratch.write("fill.ts", "return new Array(2 ** 27 - 1).fill(1.5).length;");
    let parse = scratch.write(
        "parse.ts",
        "return JSON.parse('[' + '{},'.repeat(2 ** 24 + 2 ** 23) + '0]').length",
    );
    for (program, budget, value) in [
        (&fill, "--timeout-ms", "2000"),
        (&fill, "--compute-ms", "1000"),
        (&parse, "--timeout-ms", "2000"),
    ] {
        let args = ["run", program, "--isolation", "thread", "--memory-mb", "64", budget, value];
        let (output, peak_mib) = run_measured(&args);
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(
            text.contains(r#""kind":"timeout""#) || text.contains(r#""kind":"worker-exit""#),
            "{program} {budget}: {text}"
        );
        assert!(peak_mib < 512, "{program} {budget}: the command peaked at {peak_mib} MiB");
    }
}

#[test]
fn files_of_any_depth_are_read_without_recursion() {
    let scratch = Scratch::new("deep-files");
    let depth = 150_000;
    let limits = scratch.write(
        "limits.json",
        &format!("{{\"timeoutMs\": {}{}}}", "[".repeat(depth), "]".repeat(depth)),
    );
    let program = scratch.write("one.ts", "return await tools.get()");
    check_misuse(&run(&["run", &program, "--limits", &limits]), "timeoutMs");
    // A reply (or rejection data) deeper than a Python program can read, as for `values`.
    let reply = scratch.write(
        "reply.json",
        &format!(
            "{{\"namespaces\":[{{\"global\":\"tools\",\"functions\":{{\"get\":{{\"reply\":{}1{}}}}}}}]}}",
            "{\"k\":".repeat(100_000),
            "}".repeat(100_000)
        ),
    );
    check_misuse(
        &run(&["run", &program, "--bindings", &reply]),
        "reply nests more than 256 levels",
    );
    let within = scratch.write(
        "within.json",
        &format!(
            "{{\"namespaces\":[{{\"global\":\"tools\",\"functions\":{{\"get\":{{\"reply\":{}1{}}}}}}}]}}",
            "[".repeat(256),
            "]".repeat(256)
        ),
    );
    for isolation in ["thread", "process"] {
        let output = run(&["run", &program, "--bindings", &within, "--isolation", isolation]);
        assert_eq!(output.status.code(), Some(0), "{isolation}: {}", stderr(&output));
        assert!(stdout(&output).starts_with("{\"logs\":[],\"value\":[[[["));
    }
    let python = scratch.write("one.py", "return await tools.get()");
    let output = run(&["run", &python, "--bindings", &within]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // A 30 000-deep input schema, for `describe` and for `run`.
    let schema = format!("{}{{}}{}", "{\"items\":".repeat(30_000), "}".repeat(30_000));
    let deep_schema = scratch.write(
        "schema.json",
        &format!("{{\"namespaces\":[{{\"global\":\"tools\",\"functions\":{{\"get\":{{\"echo\":true,\"input\":{schema}}}}}}}]}}"),
    );
    check_misuse(
        &run(&["describe", "--bindings", &deep_schema]),
        "input nests more than 128 levels",
    );
    check_misuse(
        &run(&["run", &program, "--bindings", &deep_schema]),
        "input nests more than 128 levels",
    );
}

#[test]
fn a_program_cannot_make_the_host_hold_more_than_its_memory_budget() {
    let scratch = Scratch::new("host-memory");
    // 120 MB of `0,` on fd 3: 60 million values, 4.3 GB of host memory when it was parsed whole.
    let zeros = scratch.write(
        "zeros.py",
        "import os\nos.write(3, b'{\"type\":\"done\",\"value\":[')\nchunk = b'0,' * (1 << 20)\nfor _ in range(60):\n    os.write(3, chunk)\nos.write(3, b'0]}\\n')\nreturn 1",
    );
    let (output, peak_mib) = run_measured(&["run", &zeros, "--memory-mb", "256"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stdout(&output).contains("what the program handed the host"), "{}", stdout(&output));
    assert!(peak_mib < 900, "the command peaked at {peak_mib} MiB");
    // Two million empty lines, each a string of the host's.
    let lines = scratch.write(
        "lines.py",
        "import os\nfor _ in range(2_000_000):\n    os.write(3, b'{\"type\":\"log\",\"text\":\"\"}\\n')\nreturn 1",
    );
    let (output, peak_mib) = run_measured(&["run", &lines, "--memory-mb", "64"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stdout(&output).contains("what the program handed the host"));
    assert!(peak_mib < 400, "the command peaked at {peak_mib} MiB");
}

/// Programs that nest deep in every way the syntax allows (half a million levels, within the
/// 1 MiB a program may have) are refused before any parser sees them: the host's stack stays
/// small whatever the program nests, in both isolations.
#[test]
fn a_program_nested_half_a_million_deep_is_refused_without_the_host_growing() {
    let scratch = Scratch::new("deep-program");
    let n = 500_000;
    for (name, program) in [
        ("parens", format!("return {}1{}", "(".repeat(n), ")".repeat(n))),
        ("nots", format!("return {}1", "!".repeat(n))),
        ("sums", format!("return 1{}", "+1".repeat(n))),
        ("members", format!("return a{}", ".b".repeat(n / 2))),
        ("calls", format!("return f{}", "()".repeat(n / 2))),
    ] {
        let path = scratch.write(&format!("{name}.ts"), &program);
        for isolation in ["process", "thread"] {
            let (output, peak_mib) = run_measured(&["run", &path, "--isolation", isolation]);
            assert_eq!(output.status.code(), Some(1), "{name} {isolation}: {}", stderr(&output));
            assert!(
                stdout(&output).contains("nests more than 1000 levels deep (1:"),
                "{name} {isolation}: {}",
                stdout(&output)
            );
            assert!(peak_mib < 200, "{name} {isolation}: the command peaked at {peak_mib} MiB");
        }
    }
}

/// `structuredClone` of 4 000 references to one 1 MiB string under a 64 MB budget: V8's
/// serializer wrote the string out per reference (the host peaked at 4.1 GB); the copy is now made
/// in the run's heap, where a reference stays one. In both isolations the command stays small.
#[test]
fn structured_clone_of_shared_strings_does_not_grow_the_host() {
    let scratch = Scratch::new("clone-shared");
    let path = scratch.write(
        "clone.ts",
        "const big = 'x'.repeat(1 << 20); return structuredClone(new Array(4000).fill(big)).length",
    );
    for isolation in ["process", "thread"] {
        let (output, peak_mib) =
            run_measured(&["run", &path, "--isolation", isolation, "--memory-mb", "64"]);
        assert_eq!(output.status.code(), Some(0), "{isolation}: {}", stderr(&output));
        assert_eq!(stdout(&output).trim(), r#"{"logs":[],"value":4000}"#, "{isolation}");
        assert!(peak_mib < 300, "{isolation}: the command peaked at {peak_mib} MiB");
    }
}

/// In `thread` isolation, a program past a 64 MB budget inside one builtin (V8 would meet it
/// with a fatal out-of-memory error), or past one of V8's internal size limits (a fatal error with
/// no handler), ends as `worker-exit`; the command answers, it does not crash.
#[test]
fn v8s_fatal_errors_end_the_run_in_thread_isolation() {
    let scratch = Scratch::new("v8-fatal");
    for (name, program, words) in [
        ("split", "return 'a'.repeat(1e8).split('').length", "out of memory"),
        ("size", "return 'x'.repeat(2 ** 28).split('').length", "V8 fatal error"),
    ] {
        let path = scratch.write(&format!("{name}.ts"), program);
        let output = run(&["run", &path, "--isolation", "thread", "--memory-mb", "64"]);
        assert_eq!(output.status.code(), Some(1), "{name}: {}", stderr(&output));
        let text = stdout(&output);
        assert!(text.contains(r#""kind":"worker-exit""#) && text.contains(words), "{name}: {text}");
    }
}

#[test]
fn the_record_file_streams_and_stops_at_its_bound() {
    let scratch = Scratch::new("record-bound");
    let bindings = scratch.echo_bindings();
    let program = scratch.write(
        "calls.ts",
        "for (let i = 0; i < 100; i++) await tools.echo('x'.repeat(100)); return 'done'",
    );
    let record = scratch.0.join("calls.jsonl");
    let record = record.to_str().unwrap();
    let bound = "2000";
    let output = run(&[
        "run",
        &program,
        "--bindings",
        &bindings,
        "--record",
        record,
        "--record-max-bytes",
        bound,
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stdout(&output).contains("\"kind\":\"output-limit\""), "{}", stdout(&output));
    // The message names the record, not the run's output budget, which nothing came near.
    let named = format!("the record file \\\"{record}\\\" reached its bound of 2000 bytes");
    assert!(stdout(&output).contains(&named), "{}", stdout(&output));
    let written = std::fs::read_to_string(record).unwrap();
    assert!(written.len() <= 2000 && written.lines().count() >= 5, "{} bytes", written.len());
    assert!(written.ends_with('\n'), "whole lines only");
    check_misuse(
        &run(&["run", &program, "--record-max-bytes", "10"]),
        "--record-max-bytes needs --record",
    );
}

#[test]
fn the_record_and_the_events_are_readable_by_their_owner_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let scratch = Scratch::new("record-mode");
    let bindings = scratch.echo_bindings();
    let program = scratch.write("one.ts", "return await tools.echo('secret')");
    // New files, then files that were there, readable by everyone.
    for existing in [false, true] {
        let record = scratch.0.join(format!("calls-{existing}.jsonl"));
        let events = scratch.0.join(format!("events-{existing}.jsonl"));
        if existing {
            for path in [&record, &events] {
                std::fs::write(path, "old").unwrap();
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
            }
        }
        let output = run(&[
            "run",
            &program,
            "--bindings",
            &bindings,
            "--record",
            record.to_str().unwrap(),
            "--events",
            events.to_str().unwrap(),
        ]);
        assert_eq!(stdout(&output), "{\"logs\":[],\"value\":\"secret\"}\n", "{}", stderr(&output));
        for path in [&record, &events] {
            let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", path.display());
            assert!(
                std::fs::read_to_string(path).unwrap().contains("secret"),
                "{}",
                path.display()
            );
        }
    }
}

#[test]
fn command_bindings_share_a_host_wide_cap() {
    let scratch = Scratch::new("command-cap");
    let log = scratch.0.join("spans");
    let log = log.to_str().unwrap();
    // Each call appends `+` when it starts and `-` when it ends: the most `+` ahead of `-` at
    // any point is how many ran at once.
    let bindings = scratch.write(
        "b.json",
        &format!(
            r#"{{"namespaces":[{{"global":"tools","functions":{{"work":{{"command":["sh","-c","echo + >> {log}; sleep 0.2; echo - >> {log}; echo 1"]}}}}}}]}}"#
        ),
    );
    let program =
        scratch.write("fan.ts", "const r = await Promise.all(Array.from({ length: 64 }, () => tools.work())); return r.length");
    let output = run(&["run", &program, "--bindings", &bindings, "--timeout-ms", "60000"]);
    assert_eq!(stdout(&output), "{\"logs\":[],\"value\":64}\n", "{}", stderr(&output));
    let spans = std::fs::read_to_string(log).unwrap();
    let (mut running, mut most) = (0i32, 0i32);
    for line in spans.lines() {
        running += if line == "+" { 1 } else { -1 };
        most = most.max(running);
    }
    let cap = std::thread::available_parallelism().map_or(1, |n| n.get()) * 4;
    assert!(most as usize <= cap, "{most} commands ran at once, the cap is {cap}");
}

/// The pids of `pid`'s descendants, from `/proc`.
fn descendants(pid: libc::pid_t) -> Vec<libc::pid_t> {
    let parents: Vec<(libc::pid_t, libc::pid_t)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| {
            let child: libc::pid_t = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).ok()?;
            // The command name may hold spaces and parentheses: count from its end.
            let parent =
                stat.get(stat.rfind(')')? + 2..)?.split_whitespace().nth(1)?.parse().ok()?;
            Some((child, parent))
        })
        .collect();
    let mut found = vec![pid];
    let mut index = 0;
    while index < found.len() {
        let parent = found[index];
        found.extend(parents.iter().filter(|(_, of)| *of == parent).map(|(child, _)| *child));
        index += 1;
    }
    found.split_off(1)
}

/// Whether `pid` still runs (a zombie has ended).
fn alive(pid: libc::pid_t) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.get(stat.rfind(')')? + 2..)?.chars().next())
        .is_some_and(|state| state != 'Z' && state != 'X')
}

#[test]
fn a_killed_host_leaves_no_cell_behind() {
    // The host dies without a word (SIGKILL: no signal handler, no dispose): its cells, whose
    // programs would sleep for an hour, die with it.
    let scratch = Scratch::new("killed-host");
    for (name, program) in [
        ("sleep.py", "import time\ntime.sleep(3600)"),
        ("sleep.ts", "await new Promise((resolve) => setTimeout(resolve, 3_600_000))"),
    ] {
        let program = scratch.write(name, program);
        let mut child = binary()
            .args(["run", &program])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pid = libc::pid_t::try_from(child.id()).unwrap();
        // The cell's init is a child of the host named `cell`; its program below it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let cells = loop {
            let cells = descendants(pid);
            let named = cells.iter().any(|cell| {
                std::fs::read_to_string(format!("/proc/{cell}/comm")).is_ok_and(|c| c == "cell\n")
            });
            if named && cells.len() >= 2 {
                break cells;
            }
            assert!(std::time::Instant::now() < deadline, "{name}: no cell started");
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        child.kill().unwrap();
        child.wait().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while cells.iter().any(|&cell| alive(cell)) {
            assert!(
                std::time::Instant::now() < deadline,
                "{name}: the cell outlived its host: {:?}",
                cells.iter().filter(|&&cell| alive(cell)).collect::<Vec<_>>()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}
