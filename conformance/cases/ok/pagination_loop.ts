const all: number[] = [];
let pages = 0;
while (pages < 5) {
  const { items } = await tools.page({ page: pages });
  all.push(...items);
  pages++;
}
return { pages, count: all.length, sum: all.reduce((a, b) => a + b, 0) };
