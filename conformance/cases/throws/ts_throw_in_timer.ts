setTimeout(() => { throw new Error('in timer') }, 1);
await new Promise((r) => setTimeout(r, 30));
return 1
