console.log("start");
for (;;) {}
