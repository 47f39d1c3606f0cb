const outcomes: string[] = [];
for (const name of ["echo", "fail", "echo"]) {
  try {
    await (tools as any)[name]({ name });
    outcomes.push("ok");
  } catch (error) {
    outcomes.push(`${error.toolName} failed: ${error.message}`);
  }
}
return outcomes;
