return { a: [], o: {}, s: "", z: 0, f: false, n: null }
