type T = { a: number };
interface I { b?: string }
function f<T>(x: T): T { return x }
const v = f<number>(3) satisfies number;
class C { declare y: number; z: number = 1 }
return [v, new C().z];
