setTimeout(() => console.log('late'), 50);
return 'early'
