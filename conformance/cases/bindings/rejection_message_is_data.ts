try {
  await tools.fail({});
} catch (error) {
  return [error.name, error.message];
}
