return "y".repeat(10_000)
