try:
    await tools.echo(lambda: 1)
except ToolCallError as error:
    return [True, error.toolName, str(error)]
