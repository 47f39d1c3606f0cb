console.log('%s done', 'x', 1, null, undefined, true, [1, [2, [3, [4, [5]]]]], { a: { b: { c: { d: { e: 1 } } } } }, () => 1);
console.info('i'); console.warn('w'); console.error('e'); console.debug('d');
return Object.keys(console).sort()
