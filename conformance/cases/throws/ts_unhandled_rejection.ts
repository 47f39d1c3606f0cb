void Promise.reject(new Error('unhandled'));
await new Promise((r) => setTimeout(r, 20));
return 1
