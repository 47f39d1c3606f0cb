return {"a": [], "o": {}, "s": "", "z": 0, "f": False, "n": None}
