return new (class A { x = 1 })()
