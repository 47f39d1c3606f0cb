return { f: () => 1 }
