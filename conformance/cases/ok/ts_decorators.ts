const calls: string[] = [];
function traced(method: any, context: ClassMethodDecoratorContext) {
  return function (this: any, ...args: any[]) { calls.push(String(context.name)); return method.apply(this, args) };
}
class Counter {
  count = 0;
  @traced increment(by: number) { this.count += by; return this.count }
}
const counter = new Counter();
counter.increment(2);
return [counter.increment(3), calls]
