return b"x"
