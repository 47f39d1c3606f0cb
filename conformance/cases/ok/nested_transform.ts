const input = await tools.echo({ users: [{ name: "ada", langs: ["ml", "rust"] }, { name: "bob", langs: [] }] });
return Object.fromEntries(input.users.map((u: any) => [u.name, u.langs.length]));
