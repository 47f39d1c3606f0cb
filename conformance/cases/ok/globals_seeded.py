return sorted(k for k in globals() if not k.startswith("__"))
