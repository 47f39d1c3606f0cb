// More arguments than a binding takes is a TypeError at the call, never a silent drop.
try {
  await (tools.echo as any)(1, 2, 3);
  return "called";
} catch (error) {
  return [error instanceof TypeError, error.message];
}
