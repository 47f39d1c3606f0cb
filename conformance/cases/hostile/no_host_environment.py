# Nothing of the host's environment reaches the program: its whole environment is HOME, the run's
# own work directory (Python adds LC_CTYPE to its own copy).
import os
return [sorted(key for key in os.environ if key != "LC_CTYPE"), os.environ["HOME"] == os.getcwd()]
