return { get bad() { throw new Error('x') } }
