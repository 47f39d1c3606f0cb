try {
  await tools.fail({});
} catch (error) {
  return { isTyped: error instanceof ToolCallError, toolName: error.toolName, message: error.message };
}
