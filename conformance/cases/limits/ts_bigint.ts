return 1n
