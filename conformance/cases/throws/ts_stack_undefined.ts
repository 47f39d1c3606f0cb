const e = new Error('bare');
e.stack = undefined;
throw e
