class A { constructor(private x: number) {} }
return 1
