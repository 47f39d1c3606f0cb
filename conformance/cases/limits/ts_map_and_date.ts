return [new Map(), new Date(0)]
