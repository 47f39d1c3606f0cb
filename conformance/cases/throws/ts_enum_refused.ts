enum E { A }
return 1
