return len([7] * 50000)
