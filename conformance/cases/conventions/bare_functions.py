# Tools as bare global functions with positional arguments (Anthropic's programmatic tool
# calling, Pydantic AI, Monty): the namespace has "globals": true.
members = await get_team_members("engineering")
over = []
for member in members:
    expenses = await get_expenses(member["id"], "Q3")
    total = sum(e["amount"] for e in expenses)
    budget = await get_budget_by_level(member["level"])
    if total > budget["limit"]:
        over.append({"name": member["name"], "total": total})
return over
