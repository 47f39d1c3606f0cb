"""JSON Schemas of Python functions, from their type hints, and the calls that follow them.

With pydantic installed, every hint pydantic understands becomes its schema (models, TypedDicts,
dataclasses, ``Annotated`` with ``Field``), and each argument is validated and converted by it
before the function runs (a ``dict`` becomes the model the parameter asks for). Without pydantic,
the plain hints (``str``, ``int``, ``float``, ``bool``, ``None``, ``list[X]``, ``dict[str, X]``,
``Optional``/``Union``, ``Literal``, ``Any``) become schemas and arguments pass as they are.
"""

from __future__ import annotations

import inspect
import typing
from dataclasses import dataclass
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

try:  # pragma: no cover - exercised with and without pydantic
    import pydantic
except ImportError:  # pragma: no cover
    pydantic = None  # type: ignore[assignment]


@dataclass(frozen=True)
class Parameter:
    name: str
    hint: Any
    required: bool
    default: Any


@dataclass(frozen=True)
class Signature:
    """How the program's one argument becomes the call of a Python function."""

    parameters: Tuple[Parameter, ...]
    #: The function takes one pydantic model, the whole argument (``def f(query: Query)``).
    model: Any
    input_schema: Optional[Dict[str, Any]]
    output_schema: Optional[Dict[str, Any]]
    #: pydantic's validator of each annotated parameter, made once.
    adapters: Dict[str, Any]
    #: The parameters' names, and those of the required ones: looked up in every call.
    names: FrozenSet[str]
    required: Tuple[str, ...]


def _is_model(hint: Any) -> bool:
    return (
        pydantic is not None
        and inspect.isclass(hint)
        and issubclass(hint, pydantic.BaseModel)
    )


def _plain_schema(hint: Any) -> Dict[str, Any]:
    """The schema of a hint without pydantic (``{}`` for what it cannot say)."""
    if hint is Any or hint is inspect.Parameter.empty:
        return {}
    if hint is None or hint is type(None):
        return {"type": "null"}
    simple = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if hint in simple:
        return {"type": simple[hint]}
    if hint in (list, tuple):
        return {"type": "array"}
    if hint is dict:
        return {"type": "object"}
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (list, List, tuple, Tuple):
        if origin in (tuple, Tuple) and not (len(args) == 2 and args[1] is Ellipsis):
            return {"type": "array"}
        return {"type": "array", "items": _plain_schema(args[0])} if args else {"type": "array"}
    if origin in (dict, Dict):
        if len(args) == 2:
            return {"type": "object", "additionalProperties": _plain_schema(args[1])}
        return {"type": "object"}
    if origin is typing.Union or type(hint).__name__ == "UnionType":
        return {"anyOf": [_plain_schema(arg) for arg in args]}
    if origin is typing.Literal:
        return {"enum": list(args)}
    return {}


def _hint_schema(hint: Any, defs: Dict[str, Any]) -> Dict[str, Any]:
    if hint is inspect.Parameter.empty or hint is Any:
        return {}
    if pydantic is None:
        return _plain_schema(hint)
    try:
        schema = dict(pydantic.TypeAdapter(hint).json_schema(ref_template="#/$defs/{model}"))
    except Exception:  # a hint pydantic has no schema for says nothing
        return _plain_schema(hint)
    defs.update(schema.pop("$defs", {}))
    return schema


def signature_of(
    function: Callable[..., Any],
    input_schema: Optional[Dict[str, Any]] = None,
    output_schema: Optional[Dict[str, Any]] = None,
) -> Signature:
    """The signature of ``function``; schemas given explicitly win over the hints."""
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except Exception:  # hints that do not resolve: treat as unannotated
        hints = {}
    parameters = []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        parameters.append(
            Parameter(
                name=parameter.name,
                hint=hints.get(parameter.name, inspect.Parameter.empty),
                required=parameter.default is inspect.Parameter.empty,
                default=parameter.default,
            )
        )
    model = None
    if len(parameters) == 1 and _is_model(parameters[0].hint):
        model = parameters[0].hint
    if input_schema is None:
        if model is not None:
            input_schema = model.model_json_schema()
        else:
            defs: Dict[str, Any] = {}
            properties = {p.name: _hint_schema(p.hint, defs) for p in parameters}
            input_schema = {"type": "object", "properties": properties}
            required = [p.name for p in parameters if p.required]
            if required:
                input_schema["required"] = required
            if defs:
                input_schema["$defs"] = defs
    returns = hints.get("return", inspect.Parameter.empty)
    if output_schema is None and returns not in (inspect.Parameter.empty, Any):
        defs = {}
        output_schema = _hint_schema(returns, defs) or None
        if output_schema is not None and defs:
            output_schema["$defs"] = defs
    adapters: Dict[str, Any] = {}
    if pydantic is not None and model is None:
        for p in parameters:
            if p.hint is not inspect.Parameter.empty and p.hint is not Any:
                try:
                    adapters[p.name] = pydantic.TypeAdapter(p.hint)
                except Exception:  # a hint pydantic cannot validate passes values as they are
                    pass
    return Signature(
        tuple(parameters),
        model,
        input_schema,
        output_schema,
        adapters,
        frozenset(p.name for p in parameters),
        tuple(p.name for p in parameters if p.required),
    )


class ArgumentError(TypeError):
    """The program's argument does not fit the function's parameters."""


def arguments(signature: Signature, argument: Any) -> Dict[str, Any]:
    """The keyword arguments of a call whose program passed ``argument``."""
    if signature.model is not None:
        name = signature.parameters[0].name
        try:
            return {name: signature.model.model_validate(argument)}
        except pydantic.ValidationError as error:
            raise ArgumentError(str(error)) from None
    if argument is None:
        argument = {}
    if not isinstance(argument, dict):
        if len(signature.parameters) == 1:
            argument = {signature.parameters[0].name: argument}
        else:
            raise ArgumentError(
                f"the argument must be an object with "
                f"{', '.join(p.name for p in signature.parameters) or 'no'} properties, "
                f"not {type(argument).__name__}"
            )
    if not signature.names.issuperset(argument):
        unknown = [name for name in argument if name not in signature.names]
        raise ArgumentError(
            f"unexpected argument {', '.join(repr(n) for n in unknown)} "
            f"(the parameters are {', '.join(p.name for p in signature.parameters) or 'none'})"
        )
    for name in signature.required:
        if name not in argument:
            missing = [name for name in signature.required if name not in argument]
            raise ArgumentError(f"missing argument {', '.join(repr(n) for n in missing)}")
    if not signature.adapters:
        return dict(argument)
    converted = {}
    for name, value in argument.items():
        adapter = signature.adapters.get(name)
        if adapter is None:
            converted[name] = value
            continue
        try:
            converted[name] = adapter.validate_python(value)
        except pydantic.ValidationError as error:
            raise ArgumentError(f"argument {name!r}: {error}") from None
    return converted
