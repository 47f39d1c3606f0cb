try { await tools.fail({}) } catch (e) { return [e instanceof Error, e instanceof ToolCallError, e.name, Object.keys(e), e.message] }
