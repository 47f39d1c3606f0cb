const x = <number>1;
return x
