"""The package's API against both languages and both isolations."""

import asyncio
import contextvars
import dataclasses
import datetime
import pathlib
import sys
import threading
from typing import Any, Dict, List

import pytest

from code_runtime import (
    BindingError,
    ContractError,
    Decision,
    Limits,
    Namespace,
    Runtime,
    describe,
)


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def program(rt: Runtime, python: str, typescript: str) -> str:
    return python if rt.language == "python" else typescript


def test_a_program_returns_a_value_and_its_logs(rt: Runtime) -> None:
    code = program(rt, "print('hi')\nreturn {'n': 1 + 1}", "console.log('hi'); return {n: 1 + 1};")
    result = run(rt.run(code))
    assert result.ok
    assert result.value == {"n": 2}
    assert result.logs == ["hi"]
    assert result.error is None


def test_a_failing_program_is_a_result_not_an_exception(rt: Runtime) -> None:
    code = program(rt, "raise ValueError('nope')", "throw new Error('nope');")
    result = run(rt.run(code))
    assert not result.ok
    assert result.error is not None
    assert result.error.kind == "exception"
    assert "nope" in result.error.message
    assert result.value is None


def test_a_result_over_truncate_comes_back_shrunk_and_says_so(rt: Runtime) -> None:
    code = program(
        rt,
        "return [{'id': i, 'text': 'word ' * 40} for i in range(2000)]",
        "return Array.from({ length: 2000 }, (_, i) => ({ id: i, text: 'word '.repeat(40) }));",
    )
    result = run(rt.run(code, truncate=4000))
    assert result.ok and result.truncated is not None
    assert result.truncated.from_bytes > 400_000
    assert 2000 < result.truncated.to_bytes <= 4000
    assert result.value[0]["id"] == 0 and result.value[-1].endswith(" more items")
    # Within the budget: whole, and nothing said.
    small = run(rt.run(program(rt, "return [1, 2]", "return [1, 2];"), truncate=4000))
    assert small.value == [1, 2] and small.truncated is None
    with pytest.raises(ContractError, match="truncate is a number of bytes"):
        run(rt.run("return 1", truncate=-1))


def test_a_syntax_error_is_an_exception_result(rt: Runtime) -> None:
    result = run(rt.run("return (("))
    assert result.error is not None and result.error.kind == "exception"


def tools_namespace() -> Namespace:
    tools = Namespace("tools", error_class="ToolError")

    @tools.function
    async def add(a: int, b: int) -> int:
        """Adds two integers."""
        return a + b

    @tools.function
    def shout(text: str) -> str:
        """A plain function: it runs on the loop's executor."""
        return text.upper()

    @tools.function
    async def fail(code: int) -> None:
        raise BindingError("it failed", {"code": code})

    @tools.function
    async def crash() -> None:
        raise KeyError("missing")

    @tools.function
    async def weird(kind: str) -> Any:
        return {"set": {1, 2}, "date": datetime.date(2026, 1, 1), "nan": float("nan")}[kind]

    return tools


def test_bindings_resolve_and_reject_with_data(rt: Runtime) -> None:
    code = program(
        rt,
        """
a = await tools.add(a=2, b=3)
b = await tools.shout(text='hey')
try:
    await tools.fail(code=7)
except ToolError as e:
    c = [str(e), e.data, e.tool]
try:
    await tools.crash()
except ToolError as e:
    d = str(e)
return [a, b, c, d]
""",
        """
const a = await tools.add({a: 2, b: 3});
const b = await tools.shout({text: 'hey'});
let c, d;
try { await tools.fail({code: 7}); } catch (e: any) { c = [e.message, e.data, e.tool, e instanceof ToolError]; }
try { await tools.crash({}); } catch (e: any) { d = e.message; }
return [a, b, c, d];
""",
    )
    result = run(rt.run(code, namespaces=[tools_namespace()]))
    assert result.error is None, result.error
    a, b, c, d = result.value
    assert (a, b) == (5, "HEY")
    assert c[:3] == ["it failed", {"code": 7}, "fail"]
    assert d == "KeyError: 'missing'"


@pytest.mark.parametrize("kind", ["set", "date", "nan"])
def test_a_value_that_is_not_json_rejects_the_call_with_a_type_error(
    rt: Runtime, kind: str
) -> None:
    code = program(
        rt,
        f"""
try:
    await tools.weird(kind={kind!r})
except ToolError as e:
    return str(e)
""",
        f"try {{ await tools.weird({{kind: {kind!r}}}); }} catch (e: any) {{ return e.message; }}",
    )
    result = run(rt.run(code, namespaces=[tools_namespace()]))
    assert result.error is None, result.error
    assert result.value.startswith("TypeError: tools.weird returned ")
    assert "not" in result.value


def test_an_argument_that_does_not_fit_the_parameters_rejects_the_call(rt: Runtime) -> None:
    code = program(
        rt,
        "try:\n    await tools.add(a=1)\nexcept ToolError as e:\n    return str(e)",
        "try { await tools.add({a: 1}); } catch (e: any) { return e.message; }",
    )
    result = run(rt.run(code, namespaces=[tools_namespace()]))
    assert result.value == "TypeError: missing argument 'b'"


def test_a_binding_runs_as_a_task_of_its_own(rt: Runtime) -> None:
    """Its first step runs at once (an eager start, on asyncio's own loops), and it is still a
    real task: ``current_task``, timeouts, and a context of its own; after one that waited, the
    next call starts inside the task that answered (which polls the run), and each task is the
    current one in its own steps only, the loop reporting nothing."""
    tools = Namespace("tools")
    seen: List[Any] = []

    @tools.function
    async def at_once(n: int) -> Any:
        task = asyncio.current_task()
        seen.append(task)
        return n * 2

    @tools.function
    async def later(n: int) -> Any:
        before = asyncio.current_task()
        await asyncio.sleep(0)
        assert asyncio.current_task() is before
        return n

    @tools.function
    async def timed(n: int) -> Any:
        try:
            await asyncio.wait_for(asyncio.sleep(10), timeout=0.01)
        except asyncio.TimeoutError:
            pass
        return asyncio.current_task() is not None

    code = program(
        rt,
        "return [await tools.at_once(n=1), await tools.later(n=5), await tools.at_once(n=2),"
        " await tools.later(n=6), await tools.later(n=7), await tools.timed(n=0)]",
        "return [await tools.at_once({n: 1}), await tools.later({n: 5}), await tools.at_once({n: 2}),"
        " await tools.later({n: 6}), await tools.later({n: 7}), await tools.timed({n: 0})];",
    )
    reported: List[Dict[str, Any]] = []

    async def main() -> Any:
        asyncio.get_running_loop().set_exception_handler(lambda _, context: reported.append(context))
        return await rt.run(code, namespaces=[tools])

    result = run(main())
    assert result.value == [2, 5, 4, 6, 7, True], result.error
    assert reported == []
    assert len(seen) == 2 and all(isinstance(task, asyncio.Task) for task in seen)
    assert seen[0] is not seen[1]


def test_a_call_left_behind_is_cancelled_with_what_it_awaits(rt: Runtime) -> None:
    """A program that ends without awaiting its call cancels the call, and the cancellation
    reaches what the call awaits, as a task's cancel does (here a gather's child task, which
    must not outlive the run), whether the call's first step ran inside the poll that ended
    the run or on a turn of the loop before."""
    tools = Namespace("tools")
    children: List["asyncio.Task[None]"] = []
    cancelled: List[bool] = []

    @tools.function
    async def fan_out() -> None:
        child = asyncio.ensure_future(asyncio.sleep(3600))
        children.append(child)
        try:
            await asyncio.gather(child)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    # Fired as the program returns (the run may end before the call starts, or inside the poll
    # that started it), and fired a little before.
    at_once = program(
        rt,
        "asyncio.ensure_future(tools.fan_out())\nawait asyncio.sleep(0)\nreturn 1",
        "tools.fan_out(); return 1;",
    )
    after_a_while = program(
        rt,
        "asyncio.ensure_future(tools.fan_out())\nawait asyncio.sleep(0.01)\nreturn 1",
        "tools.fan_out(); await new Promise((r) => setTimeout(r, 10)); return 1;",
    )

    async def main() -> List[bool]:
        for code in [at_once, after_a_while] * 10:
            assert (await rt.run(code, namespaces=[tools])).value == 1
        for _ in range(200):
            if all(child.done() for child in children):
                break
            await asyncio.sleep(0.01)
        # Looked at before the loop's end, which cancels whatever is left.
        return [child.cancelled() for child in children]

    children_cancelled = run(main())
    assert len(children) >= 10, "a call fired a while before the program returns starts"
    assert all(children_cancelled)
    assert len(cancelled) == len(children)


def test_a_calls_first_step_runs_at_once_in_a_task_of_its_own() -> None:
    """How a binding call starts (``_eager_task``: 3.12's eager start, and the task's own first
    step run at once before 3.12): the first step runs before the call returns, with the task
    current and in the task's context, an outer task current again after; the task then goes on
    as any other. Each way a task can end, including a cancel that comes before the loop's next
    turn, which reaches what the task waits for."""
    from code_runtime._namespace import _eager_task

    marker: "contextvars.ContextVar[str]" = contextvars.ContextVar("marker", default="outside")

    async def main() -> List[Any]:
        loop = asyncio.get_running_loop()
        outer = asyncio.current_task()
        trace: List[Any] = []

        async def answers_at_once() -> str:
            trace.append(asyncio.current_task())
            marker.set("inside")
            if sys.version_info >= (3, 11):
                async with asyncio.timeout(5):
                    pass
            return "done"

        task = _eager_task(loop, answers_at_once(), contextvars.copy_context())
        assert trace == [task], "the first step runs at once, as the task"
        assert asyncio.current_task() is outer
        assert marker.get() == "outside"
        task.cancel()  # after the answer: nothing left to stop
        assert await task == "done"

        async def waits() -> str:
            marker.set("set in the first step")
            await asyncio.sleep(0)
            return marker.get()

        assert await _eager_task(loop, waits(), contextvars.copy_context()) == "set in the first step"

        async def fails() -> None:
            raise KeyError("first step")

        with pytest.raises(KeyError, match="first step"):
            await _eager_task(loop, fails(), contextvars.copy_context())

        children: List["asyncio.Future[None]"] = []
        seen: List[str] = []

        async def fans_out() -> None:
            children.append(asyncio.ensure_future(asyncio.sleep(3600)))
            try:
                await asyncio.gather(*children)
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

        task = _eager_task(loop, fans_out(), contextvars.copy_context())
        task.cancel()  # before the loop's next turn
        with pytest.raises(asyncio.CancelledError):
            await task
        # Looked at before the loop's end, which cancels whatever is left.
        return [seen, children[0].cancelled()]

    seen, child_cancelled = run(main())
    assert seen == ["cancelled"]
    assert child_cancelled, "the cancel reached what the call waited for"


def test_runs_that_end_on_a_bindings_answer_leave_their_loop_clean(rt: Runtime) -> None:
    """A call's task polls its run when it answers, so a run can end inside that task (its last
    call answered, its program returns). Many such runs on one loop, one after another and some
    at once, each ending on an answer, a rejection or a plain function's answer: every one ends
    with its result, and the loop watches no descriptor of an ended run (a run's descriptor is
    reused by the next, which a stale watch would break)."""
    tools = Namespace("tools")

    @tools.function
    async def double(n: int) -> int:
        return n * 2

    @tools.function
    async def refuse(n: int) -> int:
        raise BindingError(f"no {n}", data={"n": n})

    @tools.function
    def plain(n: int) -> int:
        return n + 1

    code = program(
        rt,
        "r = await tools.double(n=n)\ntry:\n    await tools.refuse(n=n)\nexcept Exception:\n"
        "    r += 100\nreturn r + await tools.plain(n=n)",
        "let r = await tools.double({n}); try { await tools.refuse({n}); } catch { r += 100; } "
        "return r + await tools.plain({n});",
    )

    async def many() -> List[Any]:
        loop = asyncio.get_running_loop()
        watched_before = len(loop._selector.get_map())  # type: ignore[attr-defined]
        values = []
        for n in range(40):
            values.append((await rt.run(code, namespaces=[tools], values={"n": n})).value)
        together = await asyncio.gather(
            *(rt.run(code, namespaces=[tools], values={"n": n}) for n in range(40, 60))
        )
        values.extend(result.value for result in together)
        assert len(loop._selector.get_map()) == watched_before  # type: ignore[attr-defined]
        return values

    values = run(many())
    assert values == [n * 2 + 100 + n + 1 for n in range(60)]


def test_values_are_read_only_globals(rt: Runtime) -> None:
    code = program(rt, "return spec['n'] * 2", "return spec.n * 2;")
    result = run(rt.run(code, values={"spec": {"n": 21}}))
    assert result.value == 42


def test_limits_time_out_a_loop(rt: Runtime) -> None:
    code = program(rt, "while True:\n    pass", "while (true) {}")
    result = run(rt.run(code, limits=Limits(max_wall_ms=300)))
    assert result.error is not None and result.error.kind == "timeout"


def test_a_limit_above_the_runtimes_is_a_contract_error(rt: Runtime) -> None:
    with pytest.raises(ContractError, match="max_calls"):
        run(rt.run("return 1", limits={"max_calls": 10**9}))


def test_the_limits_fields_are_the_cores_budgets() -> None:
    # The core declares each budget once; the package's typed Limits must name every one, in
    # its order, and a runtime reports each at its default.
    from code_runtime import _native

    budgets = _native.budgets()
    assert [field.name for field in dataclasses.fields(Limits)] == [name for name, _ in budgets]
    with Runtime("python", warm=False) as runtime:
        assert dataclasses.asdict(runtime.limits) == dict(budgets)


def test_an_unknown_limit_is_a_contract_error() -> None:
    with pytest.raises(ContractError, match="unknown limit"):
        Runtime("python", limits={"max_wall": 5})
    with pytest.raises(ContractError):
        Runtime("python", limits=Limits(max_output_bytes=1))


def test_bad_construction_is_a_contract_error() -> None:
    with pytest.raises(ContractError):
        Runtime("cobol")  # type: ignore[arg-type]
    with pytest.raises(ContractError):
        Runtime("python", isolation="thread")
    with pytest.raises(ContractError):
        Runtime("typescript", isolation="fiber")  # type: ignore[arg-type]
    with pytest.raises(ContractError, match="legacy_decorators is for TypeScript"):
        Runtime("python", legacy_decorators=True)


@pytest.mark.parametrize("isolation", ["process", "thread"])
def test_legacy_decorators_as_typescripts_experimental_decorators(
    isolation: str, ts_rt: Runtime, ts_thread_rt: Runtime
) -> None:
    """``legacy_decorators=True`` runs what ``experimentalDecorators`` allows and TC39's
    decorators do not (a parameter decorator; a method decorator that gets the descriptor); the
    default refuses the parameter decorator by name, at the program's own line and column."""
    code = (
        "const seen: string[] = [];\n"
        "function param(target: any, key: string, index: number) { seen.push(`${key} ${index}`); }\n"
        "function loud(target: any, key: string, d: PropertyDescriptor) {\n"
        "  const f = d.value; d.value = function (this: any, x: string) { return f.call(this, x).toUpperCase(); };\n"
        "}\n"
        "class Greeter {\n"
        "  @loud greet(@param name: string) { return `hi ${name}`; }\n"
        "}\n"
        "return [new Greeter().greet('ann'), seen];"
    )
    with Runtime("typescript", isolation=isolation, legacy_decorators=True) as legacy:  # type: ignore[arg-type]
        result = run(legacy.run(code))
    assert result.value == ["HI ANN", ["greet 0"]], result.error
    default = ts_thread_rt if isolation == "thread" else ts_rt
    refused = run(default.run(code))
    assert refused.error is not None and refused.error.kind == "exception"
    assert "a parameter decorator is TypeScript's experimentalDecorators" in refused.error.message
    assert refused.error.message.endswith("(7:15)"), refused.error.message


def test_invalid_names_raise_at_construction() -> None:
    with pytest.raises(ContractError):
        Namespace("not valid")
    with pytest.raises(ContractError):
        Namespace("print")
    with pytest.raises(ContractError):
        Namespace("tools", error_class="not valid")
    tools = Namespace("tools")

    async def f() -> None:
        return None

    with pytest.raises(ContractError):
        tools.add(f, input_schema={"type": 12}, validate_input=True)
    with pytest.raises(ContractError):
        Namespace("bare", functions_as_globals=True).add(f, name="no spaces")
    with pytest.raises(ContractError):
        tools.add(f, approval={"when": {"type": 12}, "also": 1})
    assert tools.functions == []


def test_a_closed_runtime_raises() -> None:
    async def main() -> None:
        rt = Runtime("typescript", isolation="thread")
        assert (await rt.run("return 1")).value == 1
        await rt.close()
        assert rt.closed
        with pytest.raises(ContractError):
            await rt.run("return 1")

    run(main())


def test_cancelling_the_task_aborts_the_run_and_its_calls(rt: Runtime) -> None:
    stopped = threading.Event()
    tools = Namespace("tools")

    @tools.function
    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            stopped.set()

    code = program(rt, "await tools.forever()", "await tools.forever();")

    async def main() -> None:
        task = asyncio.ensure_future(rt.run(code, namespaces=[tools]))
        for _ in range(500):
            await asyncio.sleep(0.01)
            if forever_started():
                break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(500):
            if stopped.is_set():
                break
            await asyncio.sleep(0.01)
        # The runtime goes on.
        assert (await rt.run("return 7")).value == 7

    calls: List[Dict[str, Any]] = []

    def forever_started() -> bool:
        return bool(calls)

    original = tools._functions["forever"].function

    async def recording() -> None:
        calls.append({})
        await original()

    tools.add(recording, name="forever")
    run(main())
    assert stopped.is_set()


def test_a_hundred_runs_at_once_on_one_loop(rt: Runtime) -> None:
    tools = Namespace("tools")

    @tools.function
    async def double(n: int) -> int:
        await asyncio.sleep(0)
        return n * 2

    async def one(n: int) -> Any:
        code = program(rt, f"return await tools.double(n={n})", f"return await tools.double({{n: {n}}});")
        return (await rt.run(code, namespaces=[tools])).value

    async def main() -> List[Any]:
        return list(await asyncio.gather(*(one(n) for n in range(100))))

    assert run(main()) == [n * 2 for n in range(100)]


def test_runs_from_several_threads_and_loops(ts_thread_rt: Runtime, python_rt: Runtime) -> None:
    results: List[Any] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        rt = ts_thread_rt if n % 2 else python_rt
        value = asyncio.run(rt.run(f"return {n}")).value
        with lock:
            results.append(value)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == list(range(6))


def test_events_arrive_on_the_loop(rt: Runtime) -> None:
    events: List[Dict[str, Any]] = []
    code = program(
        rt,
        "print('a')\nreturn await tools.add(a=1, b=1)",
        "console.log('a'); return await tools.add({a: 1, b: 1});",
    )

    async def main() -> Any:
        result = await rt.run(code, namespaces=[tools_namespace()], on_event=events.append)
        await asyncio.sleep(0.05)
        return result

    assert run(main()).value == 2
    kinds = [event["type"] for event in events]
    assert kinds[0] == "log" and kinds[-1] == "end"
    assert "call" in kinds and "settled" in kinds
    call = next(event for event in events if event["type"] == "call")
    assert call["namespace"] == "tools" and call["args"] == {"a": 1, "b": 1}


def test_describe_renders_declarations() -> None:
    tools = tools_namespace()
    ts = describe([tools], "typescript")
    assert "add(" in ts and "Adds two integers." in ts
    py = describe([tools], "python")
    assert "def add(" in py
    with pytest.raises(ContractError):
        describe([tools], "cobol")  # type: ignore[arg-type]


def test_a_pydantic_model_parameter(rt: Runtime) -> None:
    pydantic = pytest.importorskip("pydantic")

    class Query(pydantic.BaseModel):  # type: ignore[misc, name-defined]
        text: str
        limit: int = 3

    tools = Namespace("tools", error_class="ToolError")

    @tools.function
    async def search(query: Query) -> List[str]:  # type: ignore[valid-type]
        return [query.text] * query.limit  # type: ignore[attr-defined]

    assert '"limit"' in str(tools._functions["search"].signature.input_schema) or "limit" in str(
        tools._functions["search"].signature.input_schema
    )
    code = program(rt, "return await tools.search(text='x', limit=2)", "return await tools.search({text: 'x', limit: 2});")
    assert run(rt.run(code, namespaces=[tools])).value == ["x", "x"]


def test_a_dataclass_result_converts(rt: Runtime) -> None:
    @dataclasses.dataclass
    class Hit:
        title: str
        score: float

    tools = Namespace("tools")

    @tools.function
    async def hit() -> Hit:
        return Hit("a", 0.5)

    code = program(rt, "return await tools.hit()", "return await tools.hit();")
    assert run(rt.run(code, namespaces=[tools])).value == {"title": "a", "score": 0.5}


def test_approvals_allow_deny_and_pause_resume() -> None:
    key = b"k" * 32
    tools = Namespace("tools", error_class="ToolError")
    deleted: List[str] = []

    @tools.function(approval=True)
    async def delete(name: str) -> str:
        deleted.append(name)
        return f"deleted {name}"

    code = """
try:
    return await tools.delete(name='infra')
except ToolError as e:
    return 'caught: ' + str(e)
"""

    async def main() -> None:
        async with Runtime("python", checkpoint_key=key) as rt:
            denied = await rt.run(code, namespaces=[tools], approver=lambda r: Decision.deny("no"))
            assert denied.value == "caught: denied: no"
            assert deleted == []
            seen = []

            async def allow(request: Any) -> bool:
                seen.append((request.namespace, request.function, request.args, request.call))
                return True

            allowed = await rt.run(code, namespaces=[tools], approver=allow)
            assert allowed.value == "deleted infra"
            assert seen == [("tools", "delete", {"name": "infra"}, 1)]
            paused = await rt.run(code, namespaces=[tools], approver=lambda r: Decision.pause())
            assert paused.paused and not paused.ok and paused.checkpoint
            assert [(p.id, p.function, p.args) for p in paused.pending] == [
                (1, "delete", {"name": "infra"})
            ]
            resumed = await rt.resume(paused.checkpoint, {1: True}, namespaces=[tools])
            assert resumed.value == "deleted infra"
            forged = paused.checkpoint.replace(b"infra", b"prod!")
            with pytest.raises(ContractError):
                await rt.resume(forged, {1: True}, namespaces=[tools])
            # Its decisions were used: a replay (any decisions) runs nothing.
            for decisions in ({1: True}, {1: "no"}):
                with pytest.raises(ContractError, match="resumed already"):
                    await rt.resume(paused.checkpoint, decisions, namespaces=[tools])
            no_approver = await rt.run(code, namespaces=[tools])
            assert no_approver.value.startswith("caught: denied")

    run(main())


def test_the_event_loop_runs_while_a_program_computes(ts_thread_rt: Runtime) -> None:
    """The GIL is released while Rust runs: the caller's loop goes on during a busy program."""

    async def main() -> int:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.005)

        task = asyncio.ensure_future(ticker())
        code = "const end = Date.now() + 400; let n = 0; while (Date.now() < end) n++; return n > 0;"
        result = await ts_thread_rt.run(code)
        stop.set()
        await task
        assert result.value is True
        return ticks

    assert run(main()) >= 10


def test_an_approver_that_fails_denies(python_rt: Runtime) -> None:
    tools = Namespace("tools", error_class="ToolError")

    @tools.function(approval={"when": {"properties": {"force": {"const": True}}, "required": ["force"]}})
    async def write(force: bool = False) -> str:
        return "written"

    def broken(request: Any) -> Decision:
        raise RuntimeError("approver down")

    code = """
out = [await tools.write(force=False)]
try:
    await tools.write(force=True)
except ToolError as e:
    out.append(str(e))
return out
"""
    result = run(python_rt.run(code, namespaces=[tools], approver=broken))
    assert result.error is None, result.error
    assert result.value[0] == "written"
    assert "approver down" in result.value[1] and result.value[1].startswith("denied: ")


def test_a_sync_approver_and_a_pause_without_a_key_denies(python_rt: Runtime) -> None:
    tools = Namespace("tools", error_class="ToolError")

    @tools.function(approval=True)
    def act() -> str:
        return "done"

    code = "try:\n    return await tools.act()\nexcept ToolError as e:\n    return str(e)"
    allowed = run(python_rt.run(code, namespaces=[tools], approver=lambda r: True))
    assert allowed.value == "done"
    paused = run(python_rt.run(code, namespaces=[tools], approver=lambda r: Decision.pause()))
    assert not paused.paused
    assert paused.value.startswith("denied: ")


def test_a_binding_answer_over_the_output_budget_is_a_clear_result(rt: Runtime) -> None:
    tools = Namespace("tools")

    @tools.function
    async def big() -> str:
        return "x" * 200_000

    code = program(rt, "return await tools.big()", "return await tools.big();")
    result = run(rt.run(code, namespaces=[tools], limits=Limits(max_output_bytes=10_000)))
    assert result.error is not None and result.error.kind == "output-limit"


def test_a_blocking_close_does_not_wait_for_runs_no_loop_will_poll() -> None:
    """Runs are polled on their loop: a close from a thread whose loop stopped (or is this
    thread's own) drops them instead of waiting forever."""
    rt = Runtime("typescript", isolation="thread")
    tools = Namespace("tools")
    started = threading.Event()

    @tools.function
    async def forever() -> None:
        started.set()
        await asyncio.sleep(3600)

    loop = asyncio.new_event_loop()
    task = loop.create_task(rt.run("await tools.forever();", namespaces=[tools]))
    while not started.is_set():
        loop.run_until_complete(asyncio.sleep(0.01))
    # The loop is stopped with the run in flight; nothing will poll it again.
    rt.close_now()
    assert rt.closed
    # The host then ends what is left on its loop: the run's task, and the call's, whose reply
    # goes to a run that is gone (and is dropped there, harmlessly).
    pending = asyncio.all_tasks(loop)
    assert task in pending and len(pending) == 2
    for left in pending:
        left.cancel()
    outcomes = loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    assert all(isinstance(outcome, asyncio.CancelledError) for outcome in outcomes)
    loop.close()


def test_a_sync_close_inside_the_loop_of_a_cancelled_run() -> None:
    async def main() -> None:
        with Runtime("typescript", isolation="thread") as rt:
            run_task = asyncio.ensure_future(rt.run("while (true) {}"))
            await asyncio.sleep(0.2)
            run_task.cancel()
        # `with` closed it here, on this loop's thread, without waiting on this loop.
        assert rt.closed

    run(main())


#: The virtual environment with numpy and pandas that `cargo xtask test` installs from
#: python-packages/requirements.txt.
VENV_PYTHON = pathlib.Path(__file__).resolve().parents[2] / "python-packages/.venv/bin/python"


def test_a_virtual_environments_packages_preloaded() -> None:
    assert VENV_PYTHON.exists(), f"{VENV_PYTHON} is missing: `cargo xtask test` installs it"

    async def main() -> List[Any]:
        async with Runtime("python", python=str(VENV_PYTHON), preload=["pandas"]) as rt:
            assert ("pandas", "2.3.3") in rt.packages, rt.packages
            result = await rt.run(
                "import sys\nloaded = 'pandas' in sys.modules\nimport pandas as pd\n"
                "return [loaded, int(pd.DataFrame({'a': range(10)})['a'].sum())]"
            )
            assert result.error is None, result.error
            value: List[Any] = result.value
            return value

    assert run(main()) == [True, 45]
    with pytest.raises(ContractError):
        Runtime("typescript", isolation="thread", preload=["numpy"])
    with pytest.raises(ContractError):
        Runtime("python", preload=["not a module"])


def test_the_bench_measures_both_hosts_turn_about(rt: Runtime) -> None:
    """``python -m code_runtime.bench``'s measure, small: the Python host's figures and the Rust
    host's, on the same provider, each a positive number, and their ratios."""
    from code_runtime import bench

    figures = run(bench._measure(rt, samples=3, loops=1))
    for host in ("python_host", "rust_host"):
        assert figures[host]["trivial_run_ms"] > 0
        assert figures[host]["binding_rtt_us"] > 0
    assert figures["ratios"]["rtt_vs_rust"] > 0
    assert abs(
        figures["ratios"]["trivial_minus_rust_ms"]
        - (figures["python_host"]["trivial_run_ms"] - figures["rust_host"]["trivial_run_ms"])
    ) < 1e-9
    with pytest.raises(RuntimeError, match="the run failed"):
        rt._native.rust_host_seconds(program(rt, "raise ValueError('x')", "throw new Error('x');"))


def test_a_poll_that_fails_fails_the_awaiting_run_rather_than_hanging_it(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When handing a run's outcome to Python fails (here: the callback that settles it raises),
    the poll that found the outcome drops the run, and ``await rt.run(...)`` raises with the
    cause instead of waiting for an outcome that will never come. Both polls: the loop's (a
    trivial run) and a binding task's (the run ends on a binding's answer)."""
    from code_runtime import _runtime

    def broken(future: Any, value: Any) -> None:
        raise ValueError("settling failed")

    monkeypatch.setattr(_runtime, "_settle", broken)
    tools = Namespace("tools")

    @tools.function
    async def one() -> int:
        return 1

    async def both() -> List[str]:
        loop = asyncio.get_running_loop()
        handled: List[Any] = []
        loop.set_exception_handler(lambda _loop, context: handled.append(context))
        messages = []
        for code, namespaces in (
            ("return 1", []),
            (program(rt, "return await tools.one()", "return await tools.one();"), [tools]),
        ):
            with pytest.raises(RuntimeError, match="polling the run failed") as raised:
                await asyncio.wait_for(rt.run(code, namespaces=namespaces), timeout=30)
            messages.append(repr(raised.value.__cause__))
        return messages

    messages = run(both())
    assert all("settling failed" in message for message in messages), messages
