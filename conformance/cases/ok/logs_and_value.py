print("a", 1)
print("b")
return "done"
