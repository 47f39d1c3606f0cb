outcomes = []
for name in ["echo", "fail", "echo"]:
    try:
        await tools[name]({"name": name})
        outcomes.append("ok")
    except ToolCallError as error:
        outcomes.append(f"{error.toolName} failed: {error}")
return outcomes
