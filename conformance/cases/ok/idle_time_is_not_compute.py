return await tools.slow({})
