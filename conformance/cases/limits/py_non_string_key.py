return {1: "a"}
