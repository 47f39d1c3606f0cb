const bytes = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]);
return (await WebAssembly.compile(bytes)) ? 1 : 0
