try {
  await (tools.echo as any)();
} catch (error) {
  return error.message;
}
