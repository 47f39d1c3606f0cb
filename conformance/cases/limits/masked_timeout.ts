console.log("x".repeat(20));
await tools.slow({});
