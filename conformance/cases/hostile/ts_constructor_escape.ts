let found: unknown;
try { found = (() => {}).constructor('return this')() } catch (e) { found = String(e).split(':')[0] }
return found
