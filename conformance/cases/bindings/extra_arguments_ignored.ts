return await (tools.echo as any)(1, 2, 3)
