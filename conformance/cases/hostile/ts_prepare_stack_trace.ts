(Error as any).prepareStackTrace = () => { throw new Error('gotcha') };
throw new Error('real');
