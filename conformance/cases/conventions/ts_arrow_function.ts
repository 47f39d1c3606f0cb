// The shape some code-mode systems prompt for: the program is one async arrow function. It is
// called, and what it returns is the run's value.
async () => {
  const weather = await tools.get_weather({ city: "Lisbon" });
  const orders = await tools.list_orders({});
  return { weather: weather.celsius, orders: orders.length };
};
