print("before")
raise Exception("after-log")
