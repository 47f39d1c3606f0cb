undeclared = 1;
return 1
