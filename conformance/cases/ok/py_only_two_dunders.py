return sorted(key for key in globals() if key.startswith("__"))
