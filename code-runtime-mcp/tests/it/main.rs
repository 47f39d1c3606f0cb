//! The gateway embedded in a Rust host, as its crate documentation says: a config read from a
//! file, the provider its spec names built by the host, served over streamable HTTP on a port
//! the system chose, driven by rmcp's own client, then drained. The Python provider alone is
//! built here (from the spec's configuration), so this binary links no V8.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use code_runtime_mcp::{Control, McpConfig, Options, Transport};
use code_runtime_providers::Built;
use code_runtime_python::PythonCodeRuntime;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;

/// A directory of this test's own, emptied first.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("code-runtime-mcp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

#[test]
fn a_rust_host_serves_code_mode_over_http_and_drains_it() {
    let dir = scratch("embed");
    let bindings =
        r#"{"namespaces": [{"global": "tools", "functions": {"echo": {"echo": true}}}]}"#;
    std::fs::write(dir.join("bindings.json"), bindings).unwrap();
    let config =
        r#"{"languages": ["python"], "bindings": "bindings.json", "limits": {"timeoutMs": 30000}}"#;
    std::fs::write(dir.join("servers.json"), config).unwrap();
    let config = McpConfig::load(&dir.join("servers.json")).expect("a valid config");
    let specs = config.provider_specs();
    assert_eq!(specs.len(), 1);
    assert_eq!(specs[0].limits.max_wall_ms, 30_000);
    let python = PythonCodeRuntime::new(specs[0].python_config()).expect("python3 serves");
    let built = Built { python_packages: python.packages().to_vec(), runtime: Arc::new(python) };
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    tokio.block_on(async {
        let (control, serving, address) = serve_over_http(config, built).await;
        assert_ne!(address.port(), 0, "the port the system chose");
        let client =
            ().serve(StreamableHttpClientTransport::from_uri(format!("http://{address}/mcp")))
                .await
                .expect("the client connects");
        let tools = client.list_all_tools().await.expect("tools/list");
        let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
        assert_eq!(names, ["run_code", "search_tools", "describe_tools"]);
        let arguments = serde_json::json!({"code": "return await tools.echo(a=1)"});
        let call = CallToolRequestParams::new("run_code")
            .with_arguments(arguments.as_object().cloned().unwrap());
        let result = client.call_tool(call).await.expect("tools/call");
        assert_eq!(result.is_error, Some(false), "{result:?}");
        assert_eq!(
            result.structured_content,
            Some(serde_json::json!({"logs": [], "value": {"a": 1}}))
        );
        client.cancel().await.expect("the client closes");
        control.drain();
        let served = tokio::time::timeout(Duration::from_secs(60), serving).await;
        served.expect("the drain ends the gateway").expect("joined").expect("served without error");
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// What a client sends sizes the catalogue's lookups, so they are bounded before they start and
/// run off the threads that serve other clients (`lookup.rs`): a query of 1.2 MB over 200
/// functions of 2 KB descriptions (two of which stalled another client's `return 6*7` for 30 s)
/// is refused naming the bound, as are 257 names to describe; a query at the bound is answered,
/// and a run between them answers. On a runtime of one thread, where work on the executor would
/// hold up everything else.
#[test]
fn a_clients_lookups_are_bounded_and_leave_other_clients_served() {
    let dir = scratch("lookups");
    let description = "d".repeat(2048);
    let functions: serde_json::Map<String, serde_json::Value> = (0..200)
        .map(|i| {
            let function =
                serde_json::json!({"echo": true, "description": format!("{description} f{i}")});
            (format!("f{i}"), function)
        })
        .collect();
    let bindings = serde_json::json!({"namespaces": [{"global": "tools", "functions": functions}]});
    std::fs::write(dir.join("bindings.json"), bindings.to_string()).unwrap();
    let config = r#"{"languages": ["python"], "bindings": "bindings.json"}"#;
    std::fs::write(dir.join("servers.json"), config).unwrap();
    let config = McpConfig::load(&dir.join("servers.json")).expect("a valid config");
    let python = PythonCodeRuntime::new(config.provider_specs()[0].python_config()).unwrap();
    let built = Built { python_packages: python.packages().to_vec(), runtime: Arc::new(python) };
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    tokio.block_on(async {
        let (control, serving, address) = serve_over_http(config, built).await;
        let client =
            ().serve(StreamableHttpClientTransport::from_uri(format!("http://{address}/mcp")))
                .await
                .expect("the client connects");
        let call = |name: &str, arguments: serde_json::Value| {
            CallToolRequestParams::new(name.to_owned())
                .with_arguments(arguments.as_object().cloned().unwrap())
        };
        let huge = "search ".repeat(1_200_000 / 7);
        let refused =
            client.call_tool(call("search_tools", serde_json::json!({"query": huge}))).await;
        let message = refused.expect_err("refused").to_string();
        assert!(message.contains("at most 1024 bytes"), "{message}");
        let names: Vec<String> = (0..257).map(|i| format!("tools.f{i}")).collect();
        let refused =
            client.call_tool(call("describe_tools", serde_json::json!({"names": names}))).await;
        let message = refused.expect_err("refused").to_string();
        assert!(message.contains("at most 256 names"), "{message}");
        let run = client.call_tool(call("run_code", serde_json::json!({"code": "return 6*7"})));
        assert_eq!(
            run.await.expect("run_code").structured_content,
            Some(serde_json::json!({"logs": [], "value": 42}))
        );
        let words: String = (0..32).map(|i| format!("f{i}0 ")).collect();
        let found = client
            .call_tool(call("search_tools", serde_json::json!({"query": words.trim_end()})))
            .await
            .expect("a query at the bound is answered");
        let tools = &found.structured_content.expect("structured")["tools"];
        assert_eq!(tools.as_array().map(Vec::len), Some(20), "{tools}");
        client.cancel().await.expect("the client closes");
        control.drain();
        let served = tokio::time::timeout(Duration::from_secs(60), serving).await;
        served.expect("the drain ends the gateway").expect("joined").expect("served without error");
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// The gateway of `config` on `built`'s provider, served over HTTP on a port the system chose:
/// its control, its task, and its address once it listens.
async fn serve_over_http(
    config: McpConfig,
    built: Built,
) -> (Control, tokio::task::JoinHandle<Result<(), code_runtime_mcp::Error>>, std::net::SocketAddr) {
    let control = Control::new();
    assert_eq!(control.address(), None);
    let transport = Transport::Http { address: "127.0.0.1:0".parse().unwrap(), token: None };
    let serving = tokio::spawn(code_runtime_mcp::serve(
        config,
        vec![built],
        Options::default(),
        transport,
        control.clone(),
    ));
    let address = listening(&control).await;
    (control, serving, address)
}

/// The address `control`'s gateway listens on, once it does.
async fn listening(control: &Control) -> std::net::SocketAddr {
    let started = Instant::now();
    loop {
        if let Some(address) = control.address() {
            return address;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the gateway never listened");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
