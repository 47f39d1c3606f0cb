const regions = ["north", "south", "east"];
const pages = await Promise.all(regions.map((region) => tools.orders({ region })));
const totals: Record<string, number> = {};
const tags: Record<string, number> = {};
pages.forEach((page: any, i: number) => {
  totals[regions[i]] = page.orders.reduce((sum: number, order: any) => sum + order.amount, 0);
  for (const order of page.orders) for (const tag of order.tags) tags[tag] = (tags[tag] ?? 0) + 1;
});
return { totals, tags };
