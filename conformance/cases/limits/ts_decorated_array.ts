const a = [1];
Object.defineProperty(a, 'extra', { value: true });
return a
