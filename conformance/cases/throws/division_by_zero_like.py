o = None
return o["field"]
