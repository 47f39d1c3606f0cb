# A program that reaches for `requests`: it fails with Python's words and a hint that there is no
# network here, naming the bindings it can call instead.
import requests

orders = await tools.list_orders({})
return len(orders)
