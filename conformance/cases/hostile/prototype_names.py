# Names a prototype chain would answer to: a value's "__proto__" key is an own key of a frozen
# object, nothing is polluted, and call_tool finds only real functions (its names are no object's
# properties).
refused = []
for name in ["toString", "constructor", "hasOwnProperty", "valueOf", "tools.toString"]:
    try:
        await call_tool(name)
        refused.append(False)
    except TypeError:
        refused.append(True)
return {
    "own": list(spec),
    "protoIsOwn": "__proto__" in spec,
    "polluted": False,
    "constructorIsData": spec["constructor"] == "not a function",
    "refused": refused,
    "viaBareName": await call_tool("__proto__", {"x": 1}),
    "viaQualifiedName": await call_tool("tools.search"),
}
