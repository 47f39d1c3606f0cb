const { items } = await tools.page({});
return [...new Set(items as number[])].sort((a, b) => a - b);
