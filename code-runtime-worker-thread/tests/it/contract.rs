//! The shared contract on TypeScript.

use code_runtime::json;

use crate::*;

#[test]
fn c001_descriptors() {
    // The names cross boundaries (results, reports, the Python package); the types compare
    // equal to them.
    let runtime = default_runtime();
    assert_eq!(
        (runtime.language().as_str(), runtime.isolation().as_str()),
        ("typescript", "worker-thread")
    );
    assert!(runtime.language() == "typescript" && runtime.isolation() == "worker-thread");
}

#[test]
fn trivial_run() {
    assert_eq!(run("return 1", vec![]).to_json(), r#"{"logs":[],"value":1}"#);
}

#[test]
fn c036_erasable_typescript_and_console() {
    let program = "interface Point { x: number; y: number }\nconst p: Point = { x: 1, y: 2 } as Point;\nconsole.log('point', p);\nconsole.error([1, 'two', { deep: { deeper: { deepest: { gone: 1 } } } }]);\nreturn p.x + p.y;";
    let result = run(program, vec![]);
    assert_eq!(
        result.to_json(),
        r#"{"logs":["point { x: 1, y: 2 }","[ 1, 'two', { deep: { deeper: { deepest: [Object] } } } ]"],"value":3}"#
    );
}

#[test]
fn c037_bridge_both_ways_and_typed_rejections() {
    let namespace = tools()
        .function("echo", binding(|args| async move { Ok(json!({ "echoed": args })) }))
        .function("fail", reject("nope"))
        .function("failRaw", reject("raw-nope"));
    let program = r#"
const first = await tools.echo({ n: 1 });
let caught = {};
try { await tools.fail({}) } catch (error) { caught = { isTyped: error instanceof ToolCallError, name: error.name, toolName: error.toolName, message: error.message } }
let caughtRaw = {};
try { await tools.failRaw({}) } catch (error) { caughtRaw = { name: error.name, toolName: error.toolName, message: error.message } }
return { first, caught, caughtRaw };
"#;
    assert_eq!(
        value(&run(program, vec![namespace])),
        &json!({"first": {"echoed": {"n": 1}}, "caught": {"isTyped": true, "name": "ToolCallError", "toolName": "fail", "message": "nope"}, "caughtRaw": {"name": "ToolCallError", "toolName": "failRaw", "message": "raw-nope"}})
    );
}

/// C040 as the reference has it refuses `enum` (strip-only erasure); here what erasure refuses is
/// compiled (issue 26, docs/conformance.md), and a syntax error is still refused with its place.
#[test]
fn c040_enum_runs_and_a_syntax_error_is_refused_with_its_position() {
    assert_eq!(
        value(&run("enum E { A, B = 5, C }\nreturn [E.A, E.C, E[5]]", vec![])),
        &json!([0, 6, "B"])
    );
    let result = run("const a = 1;\nconst = ;", vec![]);
    assert_eq!(result.error().map(|e| e.kind()), Some(code_runtime::FailureKind::Exception));
    let message = result.error().unwrap().message();
    assert!(message.contains("(2:7)"), "{message}");
}

#[test]
fn c043_stack_uses_program_lines() {
    let result = run("const x = 1;\n\nthrow new Error(\"kaboom\");", vec![]);
    let message = &result.error().expect("a failure").message();
    assert!(message.starts_with("Error: kaboom\n    at program:3:7"), "{message}");
}

#[test]
fn c046_no_completion() {
    assert_eq!(run("const x = 1", vec![]).to_json(), r#"{"logs":[]}"#);
    assert_eq!(run("return null", vec![]).to_json(), r#"{"logs":[],"value":null}"#);
}

#[test]
fn c002_failure_is_a_field() {
    let result = run("throw new Error(\"boom\")", vec![]);
    assert_eq!(result.error().map(|e| e.kind()), Some(code_runtime::FailureKind::Exception));
    assert_eq!(result.value(), None);
}

#[test]
fn c003_pre_cancelled_starts_nothing() {
    let signal = code_runtime::CancellationToken::new();
    signal.cancel();
    let request =
        CodeRunRequest::new("return 1").binding(tools().function("probe", never())).signal(signal);
    assert_eq!(
        run_on(default_runtime(), request).to_json(),
        r#"{"logs":[],"error":{"kind":"abort","message":"cancelled"}}"#
    );
}

#[test]
fn c018_namespace_named_like_an_error_class() {
    let namespace = CodeBindingNamespace::new("ToolCallError");
    assert_eq!(value(&run("return typeof ToolCallError", vec![namespace])), &json!("object"));
}

#[test]
fn c038_generic_error_class() {
    let helpers = CodeBindingNamespace::new("helpers")
        .function("fail", reject("nope"))
        .error_class("HelperCallError", "helperName");
    let program = "try { await helpers.fail({}) } catch (error) { return { isTyped: error instanceof HelperCallError, isError: error instanceof Error, name: error.name, helperName: error.helperName, message: error.message }; }";
    assert_eq!(
        value(&run(program, vec![helpers])),
        &json!({"isTyped": true, "isError": true, "name": "HelperCallError", "helperName": "fail", "message": "nope"})
    );
}

#[test]
fn c039_deep_values_both_ways() {
    // 100 000 levels through the argument, the resolution and the completion.
    let program = "let value: unknown = 'leaf';\nfor (let depth = 0; depth < 100_000; depth++) value = [value];\nconst back = await tools.echo(value);\nreturn back;";
    let result = run(program, vec![tools().function("echo", echo())]);
    let encoded = code_runtime::json::encode(value(&result));
    assert_eq!(encoded.len(), 2 * 100_000 + 6);
}

#[test]
fn c045_lossy_completions() {
    for program in [
        "return { f: () => 1 }",
        "return -0",
        "return Infinity",
        "return new Array(2)",
        "const a: any[] = []; a.push(a); return a",
        "return new (class A {})()",
        "return new Map()",
        "return new Date()",
        "return [undefined]",
        "return { value: undefined }",
        "return 1n",
        "return Symbol('x')",
        "return '\\ud800'",
        "const a = [1]; Object.defineProperty(a, 'extra', { value: true }); return a",
        "return Object.create({})",
        "return { get bad() { throw new Error('x') } }",
    ] {
        let result = run(program, vec![]);
        assert_eq!(
            result.to_json(),
            r#"{"logs":[],"error":{"kind":"invalid-output","message":"program completion must be lossless JSON"}}"#,
            "{program}"
        );
    }
}

#[test]
fn lossless_completions() {
    assert_eq!(
        value(&run(
            "return { b: 1, a: [true, null, 'x', 1.5], [\"__proto__\"]: { safe: true } }",
            vec![]
        )),
        &json!({"b": 1, "a": [true, null, "x", 1.5], "__proto__": {"safe": true}})
    );
    assert_eq!(
        value(&run("const s = { v: 1 }; return [s, s]", vec![])),
        &json!([{"v": 1}, {"v": 1}])
    );
    assert_eq!(
        value(&run("return Object.assign(Object.create(null), { n: 2 ** 60 })", vec![])),
        &json!({"n": 1u64 << 60})
    );
    assert_eq!(value(&run("return new Array(50_000).fill(7).length", vec![])), &json!(50_000));
    assert_eq!(value(&run("return await Promise.resolve('€')", vec![])), &json!("€"));
}

#[test]
fn c047_logs_before_a_throw_survive() {
    let result = run("console.log('before'); throw new Error('after-log')", vec![]);
    assert_eq!(result.logs(), ["before"]);
}

#[test]
fn c085_c086_lossy_values_never_cross() {
    let bad = binding(|_| async { Ok(json!(9_007_199_254_740_993u64)) });
    let namespace = tools().function("bad", bad).function("echo", echo());
    let program = r#"
const failures = [];
try { await tools.bad({}) } catch (e) { failures.push([e instanceof ToolCallError, e.toolName, e.message]) }
const decorated = [1]; Object.defineProperty(decorated, 'extra', { value: true });
for (const value of [new Date(), decorated, () => 1, undefined, NaN, -0, 1n]) {
  try { await tools.echo(value) } catch (e) { failures.push([e instanceof ToolCallError, e.toolName, e.message]) }
}
return failures;
"#;
    let result = run(program, vec![namespace]);
    let mut expected = vec![json!([
        true,
        "bad",
        "binding \"tools.bad\" resolved with a value that is not lossless JSON (integer 9007199254740993 is not exactly representable as a double)"
    ])];
    expected.extend(std::iter::repeat_n(
        json!([true, "echo", "binding arguments must be lossless JSON"]),
        7,
    ));
    assert_eq!(value(&result), &JsonValue::from(expected));
}

#[test]
fn c090_member_names_are_own_properties() {
    let namespace = tools()
        .function("__proto__", binding(|_| async { Ok(json!("proto-ok")) }))
        .function("constructor", binding(|_| async { Ok(json!("ctor-ok")) }));
    let program = "return [await tools['__proto__']({}), await tools['constructor']({}), typeof tools['hasOwnProperty'], Object.getPrototypeOf(tools)]";
    assert_eq!(
        value(&run(program, vec![namespace])),
        &json!(["proto-ok", "ctor-ok", "undefined", null])
    );
}

#[test]
fn c094_c095_promises_and_separate_classes() {
    let namespaces = vec![
        CodeBindingNamespace::new("a").function("f", reject("x")).error_class("AError", "m"),
        CodeBindingNamespace::new("b").function("f", reject("y")).error_class("BError", "m"),
    ];
    let program = "const out = [];\ntry { await a.f({}) } catch (e) { out.push(e instanceof AError, e instanceof BError) }\ntry { await b.f({}) } catch (e) { out.push(e instanceof AError, e instanceof BError) }\nreturn out;";
    assert_eq!(value(&run(program, namespaces)), &json!([true, false, false, true]));
    assert_eq!(
        value(&run("return tools.echo(5)", vec![tools().function("echo", echo())])),
        &json!(5)
    );
}

#[test]
fn c096_c097_parameters_and_strict_mode() {
    let program = "return [typeof (globalThis as any).tools, typeof tools, typeof (globalThis as any).ToolCallError]";
    assert_eq!(value(&run(program, vec![tools()])), &json!(["undefined", "object", "undefined"]));
    let sloppy = run("undeclared = 1; return 1", vec![]);
    assert!(
        sloppy.error().unwrap().message().starts_with("ReferenceError: undeclared is not defined"),
        "{}",
        sloppy.to_json()
    );
    assert_eq!(
        value(&run("return (function () { return this === undefined })()", vec![])),
        &json!(true)
    );
}

#[test]
fn c098_c099_console_shape() {
    let result = run(
        "console.log('%s done', 'x', 1, null, undefined, [1, [2, [3, [4, [5]]]]]); console.info('i'); console.warn('w'); console.debug('d'); return Object.keys(console).sort()",
        vec![],
    );
    assert_eq!(result.logs()[0], "%s done x 1 null undefined [ 1, [ 2, [ 3, [ 4, [Array] ] ] ] ]");
    assert_eq!(result.logs()[1..], ["i", "w", "d"]);
    assert_eq!(value(&result), &json!(["debug", "error", "info", "log", "warn"]));
    assert_eq!(value(&run("return globalThis.console === console", vec![])), &json!(true));
}

#[test]
fn c102_runs_are_isolated() {
    assert!(run("(globalThis as any).leak = 'value'; return 1", vec![]).is_ok());
    assert_eq!(value(&run("return typeof (globalThis as any).leak", vec![])), &json!("undefined"));
}

#[test]
fn timers_fire_and_clear() {
    let program = "const order: string[] = [];\nconst t = setTimeout(() => order.push('cleared'), 5);\nclearTimeout(t);\nawait new Promise(r => setTimeout(() => { order.push('fired'); r(null) }, 10));\nreturn order;";
    assert_eq!(value(&run(program, vec![])), &json!(["fired"]));
}

#[test]
fn throws_in_timers_and_unhandled_rejections_are_exceptions() {
    let timer = run(
        "setTimeout(() => { throw new Error('in timer') }, 1); await new Promise(r => setTimeout(r, 50)); return 1",
        vec![],
    );
    assert!(timer.error().unwrap().message().starts_with("Error: in timer"), "{}", timer.to_json());
    let rejection = run(
        "void Promise.reject(new Error('unhandled')); await new Promise(r => setTimeout(r, 20)); return 1",
        vec![],
    );
    assert!(
        rejection.error().unwrap().message().starts_with("Error: unhandled"),
        "{}",
        rejection.to_json()
    );
    let handled_later =
        run("const p = Promise.reject(new Error('late')); p.catch(() => {}); return 1", vec![]);
    assert_eq!(value(&handled_later), &json!(1));
}

#[test]
fn c126_thrown_values_render() {
    assert_eq!(run("throw 'raw-throw'", vec![]).error().unwrap().message(), "raw-throw");
    assert_eq!(run("throw {}", vec![]).error().unwrap().message(), "[object Object]");
    assert_eq!(
        run("const e = new Error('bare'); e.stack = undefined; throw e", vec![])
            .error()
            .unwrap()
            .message(),
        "bare"
    );
    assert_eq!(
        run("const e = new Error('x'); (e as any).stack = 42; throw e", vec![])
            .error()
            .unwrap()
            .message(),
        "42"
    );
    assert_eq!(
        run("throw { toString() { throw new Error('no') } }", vec![]).error().unwrap().message(),
        "program threw an unrenderable value"
    );
}

#[test]
fn eval_and_wasm_are_refused_by_default() {
    let eval = run("return eval('1 + 1')", vec![]);
    assert!(eval.error().unwrap().message().starts_with("EvalError"), "{}", eval.to_json());
    let function = run("return new Function('return 1')()", vec![]);
    assert!(function.error().unwrap().message().starts_with("EvalError"), "{}", function.to_json());
    let wasm = run(
        "const bytes = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]); return (await WebAssembly.compile(bytes)) ? 1 : 0",
        vec![],
    );
    assert_eq!(
        wasm.error().map(|e| e.kind()),
        Some(code_runtime::FailureKind::Exception),
        "{}",
        wasm.to_json()
    );
    let allowed = WorkerThreadCodeRuntime::new(WorkerThreadConfig {
        allow_eval: true,
        allow_wasm: true,
        ..WorkerThreadConfig::default()
    })
    .unwrap();
    assert_eq!(value(&run_on(&allowed, CodeRunRequest::new("return eval('1 + 1')"))), &json!(2));
    let bytes = "const bytes = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]); return (await WebAssembly.compile(bytes)) instanceof WebAssembly.Module";
    assert_eq!(value(&run_on(&allowed, CodeRunRequest::new(bytes))), &json!(true));
}

/// C041 refuses what erasure cannot do; here it runs (see C040), positions and all.
#[test]
fn c041_non_erasable_syntax_runs() {
    for (program, expected) in [
        ("enum E { A }\nreturn E.A", json!(0)),
        ("const enum C { X = 'x' }\nreturn C.X", json!("x")),
        (
            "class A { constructor(private x: number, public readonly y = 2) {} sum() { return this.x + this.y } }\nreturn new A(1).sum()",
            json!(3),
        ),
        (
            "namespace N { export const x = 1; export namespace M { export function f() { return x + 1 } } }\nreturn N.M.f()",
            json!(2),
        ),
        ("const x = <number>1;\nreturn x", json!(1)),
        // Type-level exports and export lists declare nothing a function body can export.
        (
            "export interface I { a: number }\nexport type J = I;\nconst i: J = { a: 1 };\nexport { i };\nreturn i.a",
            json!(1),
        ),
        // Auto-accessors, which V8 does not run yet.
        ("class A { accessor x = 1; static accessor y = 2 }\nreturn new A().x + A.y", json!(3)),
        (
            "enum Status { Active = 'active' }\nconst s: Status = Status.Active;\nreturn `${s}`",
            json!("active"),
        ),
    ] {
        assert_eq!(value(&run(program, vec![])), &expected, "{program}");
    }
}

#[test]
fn decorators_run_as_tc39_specifies() {
    let program = r#"const seen: string[] = [];
function logged(method: any, context: ClassMethodDecoratorContext) {
  seen.push(`${context.kind} ${String(context.name)}`);
  return function (this: any, ...args: any[]) { return "logged " + method.apply(this, args) };
}
function sealed<T extends new (...a: any[]) => object>(Class: T, context: ClassDecoratorContext) {
  seen.push(`${context.kind} ${String(context.name)}`);
  return Class;
}
@sealed
class Greeter {
  constructor(private name: string) {}
  @logged greet() { return `hi ${this.name}` }
}
return [new Greeter("ada").greet(), seen]"#;
    assert_eq!(
        value(&run(program, vec![])),
        &json!(["logged hi ada", ["method greet", "class Greeter"]])
    );
}

/// The whole syntax, differentially: each program compiled by the pinned `tsc` and run by Node,
/// and run here (erased, or compiled by swc), their values compared.
#[test]
fn typescript_syntax_agrees_with_tsc_and_node() {
    let corpus = [
        // Enums: auto-increment after an initializer, members naming members, computed members,
        // reverse mapping, merged declarations, const enums, string and mixed enums.
        r#"enum E { A, B = 5, C, D = B * 2, F = "f".length }
enum E { G = 100 }
const enum K { X = 1 << 2, Y = X | 1 }
enum S { Up = "UP", Down = "DOWN" }
enum Mixed { No = 0, Yes = "yes" }
declare const enum Gone { Z }
return [E, E[E.C], K.Y, S, Mixed, S.Up satisfies string, typeof Gone === "undefined" ? null : 1];"#,
        // Namespaces: dotted, nested, merged with a function and with an enum, holding classes.
        r#"namespace N.M { export const x = 1; export enum Inner { P = 3 } }
namespace N { export namespace M { export const y = N.M.x + 1; } }
function f() { return f.extra; }
namespace f { export const extra = "merged"; }
enum Color { Red }
namespace Color { export function parse(s: string) { return s === "red" ? Color.Red : -1; } }
namespace Shapes { export class Square { constructor(public side: number) {} area() { return this.side ** 2; } } }
namespace Empty { export type T = string; }
return [N.M.x, N.M.y, N.M.Inner.P, f(), Color.parse("red"), new Shapes.Square(3).area(), typeof Empty];"#,
        // Parameter properties with inheritance and field initializers that read them.
        r#"class Base { constructor(public readonly id: number) {} }
class Child extends Base {
  y = this.id * 2;
  declare z: number;
  w!: string;
  static count = 0;
  constructor(id: number, private tag = "t", protected list: number[] = []) { super(id); Child.count++; }
  get both() { return `${this.tag}${this.y}${this.list.length}`; }
}
abstract class Shape { abstract area(): number; describe() { return `area ${this.area()}`; } }
class Unit extends Shape { area() { return 1; } }
const c = new Child(21);
return [c.both, Object.keys(c), Child.count, new Unit().describe(), "z" in c, "w" in c];"#,
        // Decorators (TC39): class, method, getter, field, auto-accessor, static, initializers,
        // and the order in which they are evaluated and applied.
        r#"const seen: string[] = [];
const mark = (label: string) => (value: any, context: DecoratorContext) => {
  seen.push(`${label}:${context.kind}:${String(context.name)}${"static" in context && context.static ? ":static" : ""}`);
  if (context.kind === "field") return (initial: number) => initial * 10;
  if (context.kind === "method" && !context.static) {
    context.addInitializer(function (this: any) { seen.push(`init ${String(context.name)}`); });
    return function (this: any, ...args: any[]) { return `[${value.apply(this, args)}]`; };
  }
  if (context.kind === "accessor") {
    return { get(this: any) { return value.get.call(this) + 1; }, set(this: any, v: number) { value.set.call(this, v * 2); } };
  }
  return undefined;
};
@mark("cls")
class Thing {
  @mark("f") count = 4;
  @mark("a") accessor level = 1;
  @mark("m") @mark("m2") hello(name: string) { return `hi ${name}`; }
  @mark("g") get doubled() { return this.count * 2; }
  @mark("s") static make() { return new Thing(); }
}
const t = Thing.make();
t.level = 5;
return [t.count, t.level, t.hello("ada"), t.doubled, seen];"#,
        // Erasable forms: generics, satisfies, assertions, overloads, this parameters, type-only
        // imports and exports, definite assignment, optional chaining on typed values.
        r#"import type { Foo } from "./types";
export type { Foo };
type Pair<T> = [T, T];
interface Box<T> { value: T }
function first<T,>(items: readonly T[]): T | undefined { return items[0]; }
function over(x: string): string;
function over(x: number): number;
function over(x: any) { return x; }
function self(this: { n: number }, k: number) { return this.n + k; }
const pair: Pair<number> = [1, 2];
const box = { value: "v" } satisfies Box<string>;
const n = <number>(<unknown>7);
const maybe: { deep?: { x: number } } | null = { deep: { x: 3 } };
let later!: number;
later = 9;
const id = <T,>(x: T): T => x;
return [first(pair), box.value, n, over("s"), over(2), self.call({ n: 1 }, 2), maybe?.deep!.x, later, id<string>("g"), (pair as const).length];"#,
    ];
    for program in corpus {
        let ours = value(&run(program, vec![])).clone();
        assert_eq!(ours, crate::node::compiled_by_tsc(program, false), "{program}");
    }
    // Where swc's transform parts from tsc: a namespace's export named, unqualified, from
    // another declaration of the same namespace (tsc knows it from the type checker's scopes).
    // The run fails clearly, at the name, rather than guessing.
    let merged =
        "namespace N { export const x = 1 }\nnamespace N { export const y = x + 1 }\nreturn N.y";
    let message = run(merged, vec![]).error().expect("a failure").message().to_owned();
    assert!(
        message.starts_with("ReferenceError: x is not defined\n    at program:2:32"),
        "{message}"
    );
}

/// `legacy_decorators`: decorators as `tsc`'s `experimentalDecorators` runs them, differentially
/// against `tsc` with that option (class, method, accessor, property and parameter decorators,
/// decorator factories, and their order).
#[test]
fn legacy_decorators_agree_with_tsc_and_node() {
    let program = r#"const seen: string[] = [];
function sealed(constructor: Function) { seen.push(`class ${constructor.name}`); Object.seal(constructor.prototype); }
function tag(label: string) {
  return function (target: any, key: string, descriptor?: PropertyDescriptor) {
    seen.push(`${label} ${key} ${typeof target} ${descriptor ? Object.keys(descriptor).sort().join("+") : "field"}`);
    if (descriptor && typeof descriptor.value === "function") {
      const original = descriptor.value;
      descriptor.value = function (this: any, ...args: any[]) { return `<${original.apply(this, args)}>`; };
    }
  };
}
function param(target: any, key: string, index: number) { seen.push(`param ${key} ${index}`); }
function replace<T extends new (...args: any[]) => object>(Base: T) {
  return class extends Base { extra = "added"; };
}
@sealed
@replace
class Service {
  @tag("prop") name = "svc";
  constructor(@param private readonly api: string) {}
  @tag("method") @tag("outer") call(@param what: string) { return `${this.api}:${what}`; }
  @tag("getter") get upper() { return this.name.toUpperCase(); }
}
const s = new Service("http") as Service & { extra: string };
return [s.call("x"), s.upper, s.extra, Object.isSealed(Service.prototype), seen];"#;
    let runtime = WorkerThreadCodeRuntime::new(WorkerThreadConfig {
        legacy_decorators: true,
        ..WorkerThreadConfig::default()
    })
    .unwrap();
    let ours = value(&run_on(&runtime, CodeRunRequest::new(program))).clone();
    assert_eq!(ours, crate::node::compiled_by_tsc(program, true));
    // The same program under TC39's decorators is a clear error, not a silent difference.
    let result = run(program, vec![]);
    assert!(result.error().is_some(), "{}", result.to_json());
    // Where swc's legacy transform parts from `tsc`: decorators of static members are applied in
    // the order of the class body (`tsc` applies every instance member's first).
    let statics = r#"const seen: string[] = [];
const tag = (label: string) => (target: any, key: string) => { seen.push(label); };
class C { @tag("static") static a = 1; @tag("instance") b = 2; }
return seen;"#;
    let ours = value(&run_on(&runtime, CodeRunRequest::new(statics))).clone();
    assert_eq!(ours, json!(["static", "instance"]));
    assert_eq!(crate::node::compiled_by_tsc(statics, true), json!(["instance", "static"]));
}

#[test]
fn a_compiled_programs_error_points_at_its_own_lines_and_columns() {
    // The enum makes it compiled: the printed text is not the program's, its positions are.
    let program = "enum E { A = 1 }\nconst o: any = null;\nfunction f(n: number) {\n    return o.boom + n;\n}\nreturn f(E.A)";
    let result = run(program, vec![]);
    let message = &result.error().expect("a failure").message();
    assert!(
        message.starts_with("TypeError: Cannot read properties of null (reading 'boom')\n    at f (program:4:14)\n    at program:6:8"),
        "{message}"
    );
    let thrown = "namespace N { export const x = 1 }\n\n  throw new Error(`kaboom ${N.x}`);";
    let message = run(thrown, vec![]).error().expect("a failure").message().to_owned();
    assert!(message.starts_with("Error: kaboom 1\n    at program:3:9"), "{message}");
}

#[test]
fn a_parameter_decorator_without_legacy_decorators_says_so_where_it_is() {
    // Beside a member's decorator, on a parameter property, and alone on a method's parameter:
    // each is refused by name at the program's own line:column, not by V8 without a place.
    for (program, at) in [
        (
            "const d = (...a: any[]) => {};\nclass C {\n  @d m(@d x: string) { return x; }\n}\nreturn 1;",
            "(3:8)",
        ),
        (
            "const d = (...a: any[]) => {};\nclass C {\n  constructor(@d private x: string) {}\n}\nreturn 1;",
            "(3:15)",
        ),
        (
            "const d = (...a: any[]) => {};\nclass C {\n  m(@d x: string) { return x; }\n}\nreturn 1;",
            "(3:5)",
        ),
    ] {
        let result = run(program, vec![]);
        let message = result.error().map(|error| error.message().to_owned()).unwrap_or_default();
        assert!(
            message.contains("a parameter decorator is TypeScript's experimentalDecorators")
                && message.contains(at),
            "{program}: {message}"
        );
    }
}

#[test]
fn c042_erasable_forms_run() {
    let program = "type T = { a: number };\ninterface I { b?: string }\nfunction f<T>(x: T): T { return x }\nconst v = f<number>(3) satisfies number;\nlet u!: string;\nclass C { declare y: number; z: number = 1 }\nreturn [v, new C().z, ([] as unknown[]).length];";
    assert_eq!(value(&run(program, vec![])), &json!([3, 1, 0]));
}

#[test]
fn c055_late_resolution_is_dropped() {
    let signal = code_runtime::CancellationToken::new();
    let cancel = signal.clone();
    let late = binding(move |_| {
        let cancel = cancel.clone();
        async move {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            cancel.cancel();
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            Ok(json!("too-late"))
        }
    });
    let request = CodeRunRequest::new("return await tools.late({})")
        .binding(tools().function("late", late))
        .signal(signal);
    assert_eq!(
        run_on(default_runtime(), request).to_json(),
        r#"{"logs":[],"error":{"kind":"abort","message":"cancelled"}}"#
    );
    assert_eq!(value(&run("return 2", vec![])), &json!(2));
}

#[test]
fn c062_c068_values_against_the_ledger() {
    let small = runtime(Limits { max_output_bytes: 64, ..Limits::default() });
    assert_eq!(
        run_on(&small, CodeRunRequest::new("return 'y'.repeat(10_000)")).to_json(),
        r#"{"logs":[],"error":{"kind":"output-limit","message":"outer output exceeded 64 bytes"}}"#
    );
    assert_eq!(
        value(&run("return new Array(50_000).fill(7)", vec![])),
        &JsonValue::from(vec![json!(7); 50_000])
    );
}

#[test]
fn c093_c122_error_instances() {
    let namespaces = vec![
        tools().function("fail", reject("nope")),
        CodeBindingNamespace::new("helper").function("fail", reject("helper denied")),
    ];
    let program = "const out: unknown[] = [];\ntry { await tools.fail({}) } catch (e) { out.push([e instanceof Error, e.name, Object.keys(e), e.message, e.stack.split('\\n')[0]]) }\ntry { await helper.fail({}) } catch (e) { out.push([e.constructor === Error, e.name, e.message, Object.keys(e)]) }\nreturn out;";
    assert_eq!(
        value(&run(program, namespaces)),
        &json!([
            [true, "ToolCallError", ["toolName", "data"], "nope", "ToolCallError: nope"],
            [true, "Error", "helper denied", ["data"]]
        ])
    );
}

#[test]
fn c101_logs_after_completion_are_dropped() {
    let result = run("setTimeout(() => console.log('late'), 50); return 'early'", vec![]);
    assert_eq!(result.to_json(), r#"{"logs":[],"value":"early"}"#);
}

#[test]
fn c104_c123_end_to_end() {
    let namespace = tools()
        .function(
            "double",
            binding(|args| async move { Ok(json!(args["n"].as_f64().unwrap_or(0.0) * 2.0)) }),
        )
        .function("fail", reject("denied by host"));
    let program = "const doubled: number = await tools.double({ n: 21 });\nconsole.log('halfway', doubled);\nlet failure;\ntry { await tools.fail({}) } catch (error) { failure = { typed: error instanceof ToolCallError, name: error.name, toolName: error.toolName, message: error.message } }\nreturn { doubled, failure };";
    assert_eq!(
        run(program, vec![namespace]).to_json(),
        r#"{"logs":["halfway 42"],"value":{"doubled":42,"failure":{"typed":true,"name":"ToolCallError","toolName":"fail","message":"denied by host"}}}"#
    );
}

#[test]
fn c138_c139_getters_read_once_and_shrinking_arrays() {
    let shrink = run(
        "const a = [0, 2]; Object.defineProperty(a, 0, { get() { a.length = 1; return 0 }, enumerable: true, configurable: true }); return a",
        vec![],
    );
    assert_eq!(
        shrink.error().map(|e| e.kind()),
        Some(code_runtime::FailureKind::InvalidOutput),
        "{}",
        shrink.to_json()
    );
    let counted = run(
        "let reads = 0; const o = { get v() { reads++; return 1 } }; const echoed = await tools.echo(o); return [echoed, reads]",
        vec![tools().function("echo", echo())],
    );
    assert_eq!(value(&counted), &json!([{"v": 1}, 1]));
    let throwing = run(
        "try { await tools.echo({ get bad() { throw new Error('x') } }) } catch (e) { return e.message }",
        vec![tools().function("echo", echo())],
    );
    assert_eq!(value(&throwing), &json!("binding arguments must be lossless JSON"));
}

#[test]
fn the_bootstrap_leaves_no_trace() {
    let program = "return [Object.getOwnPropertyNames(globalThis).filter((n) => n.includes('code_runtime')), typeof (globalThis as any).__code_runtime_bootstrap__]";
    assert_eq!(value(&run(program, vec![tools()])), &json!([[], "undefined"]));
}
