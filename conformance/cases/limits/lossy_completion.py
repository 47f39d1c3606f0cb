return {"f": lambda: 1}
