return "y" * 10000
