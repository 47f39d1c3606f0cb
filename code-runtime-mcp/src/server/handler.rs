//! The MCP protocol's side of the server: what it offers (`initialize`), its tool list, the
//! resources and prompts passed through from upstream servers, the client's log level, and each
//! `tools/call` routed to its tool (or refused by name). The tools themselves are the parent's.

// `set_level` and the logging types are deprecated in rmcp (SEP-2577); the parent module's
// `allow(deprecated)` covers this one too.

use std::sync::atomic::Ordering;

use code_runtime::json;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, PromptsCapability, ReadResourceRequestParams,
    ReadResourceResponse, ResourcesCapability, ServerCapabilities, ServerConfig,
    SetLevelRequestParams, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::oversized;
use crate::server::{CodeModeServer, level_rank};

impl ServerHandler for CodeModeServer {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities =
            ServerCapabilities::builder().enable_tools().enable_logging().build();
        // What the upstream servers offer besides tools, offered on.
        let (resources, prompts) = self.inner.passthrough.offers();
        if resources {
            capabilities.resources = Some(ResourcesCapability::default());
        }
        if prompts {
            capabilities.prompts = Some(PromptsCapability::default());
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("code-runtime", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Call run_code with a program that calls the tools it declares: many tool calls, \
                 one round trip, and only what the program prints and returns comes back.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.inner.tools.clone()))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.inner.passthrough.resources().await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.inner.passthrough.templates().await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.inner.passthrough.read(request).await.map(ReadResourceResponse::from)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.inner.passthrough.prompts().await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        self.inner.passthrough.prompt(request).await.map(GetPromptResponse::from)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.inner.tools.iter().find(|tool| tool.name == name).cloned()
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.inner.level.store(level_rank(request.level), Ordering::Relaxed);
        Ok(())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let router = &self.inner.router;
        if request.name == oversized::OVERSIZED {
            let bytes = request.arguments.as_ref().and_then(|arguments| arguments.get("bytes"));
            return Err(oversized::refusal(bytes.and_then(serde_json::Value::as_u64).unwrap_or(0)));
        }
        if !router.has_route(&request.name) {
            let names: Vec<&str> = self.inner.tools.iter().map(|tool| tool.name.as_ref()).collect();
            let unknown = json::quote(&request.name);
            let why = format!("unknown tool {unknown} ({})", names.join(", "));
            return Err(ErrorData::invalid_params(why, None));
        }
        router.call(ToolCallContext::new(self, request, context)).await
    }
}
