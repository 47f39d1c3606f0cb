for (let i = 0; i < 1000; i++) console.log("spam line", i);
return 1
