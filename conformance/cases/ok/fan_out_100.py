calls = [tools.echo(i) for i in range(100)]
total = 0
for call in calls:
    total += await call
return total
