# Tools presented as a tree of modules, in Python: imports that name a namespace (or a function
# of one) are satisfied by the bindings; other imports are real modules.
from servers.google_drive import get_document
from servers import salesforce
import json as encoding

doc = await get_document({"document_id": "abc123"})
update = await salesforce.update_record({"object_type": "Lead", "data": {"notes": doc["content"]}})
return encoding.dumps({"title": doc["title"], "updated": update["data"]["notes"]})
