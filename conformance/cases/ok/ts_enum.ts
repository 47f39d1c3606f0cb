enum Direction { Up = 1, Down, Left = "left" }
const enum Flag { On = 1 << 2 }
return [Direction.Up, Direction.Down, Direction[2], Direction.Left, Flag.On]
