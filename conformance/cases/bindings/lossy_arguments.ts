try {
  await tools.echo(() => 1);
} catch (error) {
  return [error instanceof ToolCallError, error.toolName, error.message];
}
