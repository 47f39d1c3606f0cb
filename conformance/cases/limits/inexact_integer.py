return 2 ** 53 + 1
