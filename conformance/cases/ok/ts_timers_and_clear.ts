const order: string[] = [];
const t = setTimeout(() => order.push('cleared'), 5);
clearTimeout(t);
await new Promise((r) => setTimeout(() => { order.push('fired'); r(null) }, 10));
return order;
