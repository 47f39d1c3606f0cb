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
        let started = Instant::now();
        let address = loop {
            if let Some(address) = control.address() {
                break address;
            }
            assert!(started.elapsed() < Duration::from_secs(60), "the gateway never listened");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
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
