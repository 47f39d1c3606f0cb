return { [Symbol('k')]: 1 }
