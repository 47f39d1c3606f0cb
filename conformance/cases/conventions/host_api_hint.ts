// A program written for Node reaches for `fs`: it fails with V8's words and a hint that there is
// no such API here, naming the bindings it can call instead.
const orders = await tools.list_orders({});
fs.writeFileSync("orders.json", JSON.stringify(orders));
return orders.length;
