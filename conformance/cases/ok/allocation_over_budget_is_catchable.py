# One allocation the memory budget cannot hold fails inside the program, catchably.
try:
    buffer = bytearray(2 ** 30)
    return ["allocated", len(buffer)]
except MemoryError:
    return "caught"
