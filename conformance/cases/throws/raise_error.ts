throw new Error("kaboom")
