throw new Error('x'.repeat(1_000_000))
