//! `code-runtime mcp` against MCP implementations nobody on this project wrote: the official
//! Python SDK as the client (`code-runtime-cli/tests/mcp/suite.py`), the reference servers from
//! npm upstream, both pinned in `mcp-peers/` and installed by `cargo xtask test`.

use std::path::PathBuf;
use std::process::Command;

use crate::{Scratch, binary, check_misuse};

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The suite over one transport; its output is shown when it fails.
fn suite(transport: &str) {
    let python = root().join("mcp-peers/.venv/bin/python");
    assert!(
        python.exists() && root().join("mcp-peers/node_modules/@modelcontextprotocol").exists(),
        "mcp-peers/ is not installed: `cargo xtask test` installs it from its lockfiles"
    );
    #[expect(clippy::disallowed_methods, reason = "the pinned MCP client under test")]
    let output = Command::new(python)
        .arg(root().join("code-runtime-cli/tests/mcp/suite.py"))
        .arg(env!("CARGO_BIN_EXE_code-runtime"))
        .arg(transport)
        .output()
        .expect("the suite runs");
    let shown = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{shown}");
    assert!(shown.contains(&format!("all checks passed over {transport}")), "{shown}");
}

#[test]
fn the_python_sdk_drives_code_mode_over_stdio() {
    suite("stdio");
}

#[test]
fn the_python_sdk_drives_code_mode_over_streamable_http() {
    suite("http");
}

#[test]
fn a_config_that_cannot_serve_is_misuse_naming_what_failed() {
    let scratch = Scratch::new("mcp-config");
    let server_everything =
        root().join("mcp-peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let cases = [
        (
            r#"{"servers": {"broken": {"command": ["/nonexistent/server"]}}}"#,
            r#"upstream server "broken": cannot start "/nonexistent/server""#,
        ),
        (
            r#"{"servers": {"quits": {"command": ["false"]}}}"#,
            r#"upstream server "quits": initialize failed"#,
        ),
        (
            r#"{"servers": {"remote": {"url": "http://127.0.0.1:1/mcp"}}}"#,
            r#"upstream server "remote": cannot connect to http://127.0.0.1:1/mcp"#,
        ),
        (r#"{"servers": {"x": {"url": "ftp://example"}}}"#, "url must be http:// or https://"),
        (r#"{"servers": {"x": {"command": []}}}"#, "command must be a non-empty array of strings"),
        (
            r#"{"servers": {"x": {"command": ["a"], "timeoutMs": 0}}}"#,
            "timeoutMs must be a positive integer",
        ),
        (
            r#"{"servers": {"x": {"url": "http://h/mcp", "env": {}}}}"#,
            r#"server "x": unknown key "env""#,
        ),
        (
            r#"{"servers": {}, "languages": ["ruby"]}"#,
            r#"languages: "ruby" is not typescript or python"#,
        ),
        (
            r#"{"servers": {}, "limits": {"timeoutMs": 0}}"#,
            "config.json: config.max_wall_ms must be a positive number",
        ),
        (r#"{"server": {}}"#, r#"unknown key "server""#),
    ];
    for (config, phrase) in cases {
        let path = scratch.write("config.json", config);
        let output = binary().args(["mcp", "--config", &path]).output().expect("the binary runs");
        check_misuse(&output, phrase);
    }
    // A namespace no program could name: refused before anything is served.
    let config = format!(
        r#"{{"servers": {{"my-server": {{"command": ["node", "{}"]}}}}}}"#,
        server_everything.display()
    );
    let path = scratch.write("config.json", &config);
    let output = binary().args(["mcp", "--config", &path]).output().expect("the binary runs");
    check_misuse(&output, r#"binding global "my-server" is not a usable identifier"#);
    check_misuse(&binary().args(["mcp"]).output().unwrap(), "mcp needs --config FILE");
    check_misuse(
        &binary().args(["mcp", "--config", &path, "--http", "nowhere"]).output().unwrap(),
        "--http needs an address",
    );
}
