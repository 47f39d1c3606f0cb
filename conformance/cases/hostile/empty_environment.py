import os
return sorted(key for key in os.environ if key != "LC_CTYPE")
