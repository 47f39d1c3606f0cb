try {
  await helpers.fail({});
} catch (error) {
  return { isTyped: error instanceof HelperCallError, helperName: error.helperName, message: error.message };
}
