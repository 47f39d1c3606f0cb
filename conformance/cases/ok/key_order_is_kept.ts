return { b: 1, a: 2, c: { z: 1, y: 2 } }
