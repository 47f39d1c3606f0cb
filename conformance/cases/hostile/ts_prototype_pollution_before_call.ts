(Object.prototype as any).polluted = 1;
(Array.prototype as any).extra = () => 1;
return await tools.echo({ list: [1, 2] })
