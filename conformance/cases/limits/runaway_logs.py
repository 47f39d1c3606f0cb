for i in range(1000):
    print("spam line", i)
return 1
