print("héllo €😀")
return ["€", "😀", "\u0000", "line\nbreak"]
