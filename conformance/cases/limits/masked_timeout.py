print("x" * 20)
await tools.slow({})
