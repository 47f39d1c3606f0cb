try:
    await tools.echo()
except ToolCallError as error:
    return str(error)
