import os
os.write(3, b'junk\n{"type":"done","value":-0}\n{"type":"call","id":5,"global":"tools","name":"missing","args":1}\n')
return "honest"
