print("start")
while True:
    pass
