await tools.fail({})
return 1
