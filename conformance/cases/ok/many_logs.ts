for (let i = 0; i < 50; i++) console.log("line", i);
return 50
