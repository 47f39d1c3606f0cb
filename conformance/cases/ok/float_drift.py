return [2.0, 1.5, 1e21, 1e-7]
