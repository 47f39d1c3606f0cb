# Host-provided inputs as globals (Cloudflare's `accountId`, `spec`): read-only, so changing
# one is a TypeError.
paths = list(spec["paths"])
call = await cloudflare.request({"method": "GET", "path": f"/accounts/{accountId}/zones/{zoneId}"})
frozen = False
try:
    spec["paths"]["/new"] = {}
except TypeError:
    frozen = True
return {"paths": paths, "call": call, "frozen": frozen}
