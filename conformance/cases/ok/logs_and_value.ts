console.log("a", 1);
console.log("b");
return "done"
