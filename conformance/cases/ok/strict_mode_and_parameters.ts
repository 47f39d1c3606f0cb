const sloppy = (function () { return this === undefined; })();
return [sloppy, typeof (globalThis as any).tools, typeof tools];
