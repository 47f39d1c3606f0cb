type Result<T> = { ok: true; value: T } | { ok: false; error: string };
const results: Result<number>[] = [{ ok: true, value: 2 }, { ok: false, error: 'x' }];
return results.map((r) => (r.ok ? r.value : r.error));
