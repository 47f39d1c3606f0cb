// A deep copy keeps shared references and cycles, as Python's copy.deepcopy does.
const shared = { n: 1 };
const state: any = { a: shared, b: shared, list: [1, [2, 3]] };
state.self = state;
const copy = structuredClone(state);
copy.a.n = 2;
copy.list[1].push(4);
return {
  shared_in_copy: copy.a === copy.b,
  cycle_in_copy: copy.self === copy,
  original_untouched: [shared.n, state.list[1].length],
  copy_changed: [copy.b.n, copy.list[1]],
};
