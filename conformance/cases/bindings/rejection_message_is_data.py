try:
    await tools.fail({})
except ToolCallError as error:
    return [type(error).__name__, str(error)]
