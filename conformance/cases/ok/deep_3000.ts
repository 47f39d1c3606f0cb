let value: unknown = "leaf";
for (let depth = 0; depth < 3000; depth++) value = [value];
const back = await tools.echo(value);
let depth = 0;
for (let v: any = back; Array.isArray(v); v = v[0]) depth++;
return depth;
