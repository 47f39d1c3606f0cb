return -0
