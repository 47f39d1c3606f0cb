import os
return os.listdir(".")
