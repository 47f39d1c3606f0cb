// Tools presented as a file tree of modules: the imports are satisfied by the bindings (a
// namespace, or a function of one), `import type` is erased and `export` is dropped.
import * as gdrive from "./servers/google-drive";
import { updateRecord } from "./servers/salesforce/updateRecord.ts";
import type { Document } from "./servers/google-drive/types";

const doc: Document = await gdrive.getDocument({ documentId: "abc123" });
export const update = await updateRecord({ objectType: "Lead", data: { notes: doc.content } });
return { title: doc.title, updated: update.data.notes };
