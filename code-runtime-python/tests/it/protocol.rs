//! docs/python-frame-protocol.md is kept true here: its transcript is replayed against the real
//! bootstrap, frame by frame.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;

use code_runtime_python::frame::{self, ChildFrame};
use code_runtime_python::{BOOTSTRAP, PROTOCOL_FD};

/// The transcript block of the protocol document: `host> ` and `child> ` lines.
fn transcript() -> Vec<(String, String)> {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/python-frame-protocol.md"
    ))
    .unwrap();
    let start = doc.find("```transcript\n").expect("the document has a transcript block")
        + "```transcript\n".len();
    let end = start + doc[start..].find("```").unwrap();
    doc[start..end]
        .lines()
        .filter(|line| !line.is_empty())
        .map(|line| {
            let (who, frame) = line.split_once("> ").expect("`host> ` or `child> `");
            (who.to_owned(), frame.to_owned())
        })
        .collect()
}

#[test]
fn c173_c174_the_documented_transcript_is_what_the_bootstrap_does() {
    assert_eq!(PROTOCOL_FD, 3);
    let (host, child) = UnixStream::pair().unwrap();
    let child_fd = child.as_raw_fd();
    #[expect(
        clippy::disallowed_methods,
        reason = "a bare bootstrap, outside the provider, to check the wire"
    )]
    let mut command = std::process::Command::new(crate::default_runtime().executable());
    command.args(["-I", "-S", "-B", "-X", "utf8", "-c", BOOTSTRAP]).env_clear();
    // SAFETY: dup2 is async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            if libc::dup2(child_fd, 3) == -1 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        });
    }
    let mut process = command.spawn().unwrap();
    drop(child);
    let mut reader = BufReader::new(host.try_clone().unwrap());
    let mut writer = host;
    let transcript = transcript();
    // The host's lines are what the provider's own frame builders write.
    let tools = crate::tools().function("echo", crate::echo());
    let hosts: Vec<&str> = transcript
        .iter()
        .filter(|(who, _)| who == "host")
        .map(|(_, frame)| frame.as_str())
        .collect();
    assert_eq!(hosts[0], frame::boot(&[tools], 65_536, 1_179_648));
    let program = "print(\"hello\")\nr = await tools.echo({\"n\": 2**60})\ntry:\n    await tools.echo(None)\nexcept ToolCallError as e:\n    print(e.toolName, e)\nreturn r";
    assert_eq!(hosts[1], frame::run(program));
    assert_eq!(hosts[2], frame::reply_ok(&1.into(), &serde_json::json!({"n": 1u64 << 60})));
    assert_eq!(hosts[3], frame::reply_error(&2.into(), "denied"));
    for (who, frame) in transcript {
        if who == "host" {
            writer.write_all(frame.as_bytes()).unwrap();
            writer.write_all(b"\n").unwrap();
        } else {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            assert_eq!(
                line.trim_end_matches('\n'),
                frame,
                "the bootstrap's frame differs from the document"
            );
            assert!(
                ChildFrame::parse(frame.as_bytes()).is_some(),
                "the host refuses a documented frame: {frame}"
            );
        }
    }
    assert!(process.wait().unwrap().success());
}
