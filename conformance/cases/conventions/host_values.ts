// Host-provided inputs as globals (Cloudflare's `accountId`, `spec`): read-only, so changing
// one is a TypeError.
const paths = Object.keys(spec.paths);
const call = await cloudflare.request({ method: "GET", path: `/accounts/${accountId}/zones/${zoneId}` });
let frozen = false;
try {
  spec.paths["/new"] = {};
} catch (error) {
  frozen = error instanceof TypeError;
}
return { paths, call, frozen };
