return [typeof tools['hasOwnProperty'], typeof tools['toString'], Object.getPrototypeOf(tools), Object.keys(tools)]
