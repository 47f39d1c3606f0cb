(Array as any).isArray = () => false;
(Object as any).keys = () => { throw new Error("tampered") };
JSON.stringify = () => "lie";
const echoed = await tools.echo({ list: [1, "€"] });
return echoed;
