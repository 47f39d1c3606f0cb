// A call with no argument passes JSON null (docs/design.md §9 item 7).
return [await (tools.echo as any)()];
