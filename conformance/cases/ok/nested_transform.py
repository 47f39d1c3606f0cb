data = await tools.echo({"users": [{"name": "ada", "langs": ["ml", "rust"]}, {"name": "bob", "langs": []}]})
return {user["name"]: len(user["langs"]) for user in data["users"]}
