raise RuntimeError("kaboom")
