namespace N { export const x = 1 }
return N.x
