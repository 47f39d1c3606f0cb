console.log("héllo €😀");
return ["€", "😀", "\u0000", "line\nbreak"]
