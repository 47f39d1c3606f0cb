console.log("abc");
return "xy"
