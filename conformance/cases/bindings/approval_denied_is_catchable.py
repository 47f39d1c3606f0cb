# A call that needs approval, with no approver, is denied: the namespace's error class, catchable
# (docs/design.md §13). A call whose argument does not match the approval schema is not asked about.
out = []
try:
    await tools.delete({"name": "infra"})
except ToolCallError as e:
    out.append([isinstance(e, ToolCallError), e.toolName, str(e)])
out.append(await tools.write({"force": False}))
try:
    await tools.write({"force": True})
except ToolCallError as e:
    out.append([isinstance(e, ToolCallError), e.toolName, str(e)])
return out
