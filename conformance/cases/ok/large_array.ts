return new Array(50_000).fill(7).length
