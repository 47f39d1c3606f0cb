# A deep copy keeps shared references and cycles, as TypeScript's structuredClone does.
import copy

shared = {"n": 1}
state = {"a": shared, "b": shared, "list": [1, [2, 3]]}
state["self"] = state
duplicate = copy.deepcopy(state)
duplicate["a"]["n"] = 2
duplicate["list"][1].append(4)
return {
    "shared_in_copy": duplicate["a"] is duplicate["b"],
    "cycle_in_copy": duplicate["self"] is duplicate,
    "original_untouched": [shared["n"], len(state["list"][1])],
    "copy_changed": [duplicate["b"]["n"], duplicate["list"][1]],
}
