// A program that returns a function it never called fails clearly instead of giving nothing.
const summarize = async () => (await tools.list_orders({})).length;
return summarize;
