const a = new Int32Array(new SharedArrayBuffer(4));
Atomics.wait(a, 0, 0);
return 1
