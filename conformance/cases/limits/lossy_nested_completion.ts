return { list: [1, 2, { bad: NaN }] }
