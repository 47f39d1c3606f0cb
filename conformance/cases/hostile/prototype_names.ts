// Names a prototype chain would answer to: a value's "__proto__" key is an own key of a frozen
// object, nothing is polluted, and call_tool finds only real functions (its names are no object's
// properties).
const refused: boolean[] = [];
for (const name of ["toString", "constructor", "hasOwnProperty", "valueOf", "tools.toString"]) {
  try {
    await call_tool(name);
    refused.push(false);
  } catch (error) {
    refused.push(error instanceof TypeError);
  }
}
return {
  own: Object.keys(spec),
  protoIsOwn: Object.prototype.hasOwnProperty.call(spec, "__proto__"),
  polluted: ({} as { polluted?: boolean }).polluted === true,
  constructorIsData: spec.constructor === "not a function",
  refused,
  viaBareName: await call_tool("__proto__", { x: 1 }),
  viaQualifiedName: await call_tool("tools.search"),
};
