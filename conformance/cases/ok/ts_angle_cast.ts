const x = <number>1;
const s = <string>(<unknown>"two");
return [x, s]
