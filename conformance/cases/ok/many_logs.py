for i in range(50):
    print("line", i)
return 50
