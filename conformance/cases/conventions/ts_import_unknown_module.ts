// An import nothing here satisfies fails clearly, listing the bindings the program has.
import { readFile } from "fs/promises";

const text = await readFile("notes.txt", "utf8");
return text.length;
