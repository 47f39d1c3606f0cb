return await tools.echo({ n: 1, list: [true, null, "x", 1.5] })
