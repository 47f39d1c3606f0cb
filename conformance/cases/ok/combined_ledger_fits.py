print("abc")
return "xy"
