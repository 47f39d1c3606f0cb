const hog: number[][] = [];
for (;;) hog.push(new Array(10_000).fill(1));
