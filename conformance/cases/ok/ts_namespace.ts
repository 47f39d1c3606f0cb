namespace Shapes {
  export const sides = 4;
  export namespace Square { export function area(side: number) { return side * side } }
}
return [Shapes.sides, Shapes.Square.area(3)]
