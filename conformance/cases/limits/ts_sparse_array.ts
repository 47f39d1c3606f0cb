return new Array(2)
