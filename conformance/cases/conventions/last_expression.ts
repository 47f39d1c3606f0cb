// A program that ends with an expression, as notebook-style code-mode prompts ask: its value is
// the result.
const orders = await tools.list_orders({});
const total = orders.reduce((sum, order) => sum + order.total, 0);
({ count: orders.length, total });
