// Codex's code mode: every tool is a member of one `tools` object, called with an object and
// fanned out with Promise.all.
const files = (await tools.list_files({ dir: "." })).filter((path: string) => path.endsWith(".rs"));
const read = await Promise.all(files.map((path: string) => tools.read_file({ path })));
return read.map((file: { path: string }) => file.path);
