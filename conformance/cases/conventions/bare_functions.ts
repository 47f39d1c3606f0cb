// Tools as bare global functions with positional arguments (Anthropic's programmatic tool
// calling, Pydantic AI, Monty): the namespace has "globals": true.
const members = await get_team_members("engineering");
const over = [];
for (const member of members) {
  const expenses = await get_expenses(member.id, "Q3");
  const total = expenses.reduce((sum, e) => sum + e.amount, 0);
  const budget = await get_budget_by_level(member.level);
  if (total > budget.limit) over.push({ name: member.name, total });
}
return over;
