const g = globalThis as any;
return ["process", "require", "Deno", "Buffer", "fetch", "module"].filter((name) => name in g);
