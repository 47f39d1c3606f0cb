print("working")
await tools.slow({})
import time
time.sleep(60)
