try:
    await tools.fail({})
except ToolCallError as error:
    return {"isTyped": True, "toolName": error.toolName, "message": str(error)}
