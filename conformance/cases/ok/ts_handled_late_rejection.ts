const p = Promise.reject(new Error('late'));
p.catch(() => {});
return 1
