items = (await tools.page({}))["items"]
return sorted(set(items))
