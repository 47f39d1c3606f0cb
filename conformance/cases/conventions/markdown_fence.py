```python
# A model answered with its program in a Markdown code fence: it runs as the fence's content,
# with every line where it was.
orders = await tools.list_orders({})
return [order["id"] for order in orders]
```
