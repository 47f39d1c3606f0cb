await tools.slow({});
return 1
