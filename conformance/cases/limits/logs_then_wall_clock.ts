console.log("working");
await tools.slow({});
await new Promise(() => {});
