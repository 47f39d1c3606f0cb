console.log("before");
throw new Error("after-log")
