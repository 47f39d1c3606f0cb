value = "leaf"
for _ in range(3000):
    value = [value]
back = await tools.echo(value)
depth = 0
while isinstance(back, list):
    back = back[0]
    depth += 1
return depth
