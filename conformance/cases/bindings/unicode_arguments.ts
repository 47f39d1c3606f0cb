return await tools.echo({ "ключ": "значение", "😀": ["€"] })
