"""Read the project's input files, checked: YAML or JSON, validated against a JSON Schema
that also fills in defaults. Bad input becomes one ClimstackError naming the file, the
key path, what was expected and the fix, never a traceback."""

import copy
import dataclasses
import functools
import json
import types
import typing
from pathlib import Path

import jsonschema
import yaml

from climstack.errors import ClimstackError

SCHEMAS = Path(__file__).parent / "schemas"


@functools.cache
def schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.json").read_text())


def read_text(path: Path, fix: str) -> str:
    """The file's text, or an error saying why it cannot be read."""
    if path.is_dir():
        raise ClimstackError(f"{path} is a directory, not a file", fix=fix)
    if not path.is_file():
        raise ClimstackError(f"{path} does not exist", fix=fix)
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise ClimstackError(f"{path} cannot be read: {err}", fix=fix) from err


def parse_yaml(path: Path, fix: str):
    try:
        return yaml.safe_load(read_text(path, fix))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ClimstackError(
            f"{path} is not valid YAML{where}: {problem}",
            fix="correct the YAML syntax (indentation, quotes, colons)",
        ) from err


def parse_json(path: Path, fix: str):
    try:
        return json.loads(read_text(path, fix))
    except json.JSONDecodeError as err:
        raise ClimstackError(
            f"{path} is not valid JSON at line {err.lineno}: {err.msg}", fix=fix
        ) from err


def _key_path(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "(top level)"


def _describe(error: jsonschema.ValidationError) -> tuple[str, str]:
    """(what is wrong, what is expected) for the most relevant schema error."""
    expected = error.schema.get("description", "")
    if error.validator == "additionalProperties":
        allowed = ", ".join(sorted(error.schema.get("properties", {})))
        return error.message, f"known keys here: {allowed}"
    if error.validator == "required":
        return error.message, expected or "add the key"
    if error.validator == "type":
        wanted = error.validator_value
        return (
            f"{error.instance!r} is a {type(error.instance).__name__}, expected "
            f"{' or '.join(wanted) if isinstance(wanted, list) else wanted}",
            expected,
        )
    return error.message, expected


def _with_defaults(validator_class):
    """A validator that also fills `default` values into the instance (jsonschema FAQ)."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema_):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub:
                    instance.setdefault(name, copy.deepcopy(sub["default"]))
        yield from validate_properties(validator, properties, instance, schema_)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


DefaultFillingValidator = _with_defaults(jsonschema.Draft202012Validator)


_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _json_schema(hint) -> dict:
    """The JSON Schema of a type hint: str, int, list[X], dict[str, X], X | None."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in _JSON_TYPES:
        return {"type": _JSON_TYPES[hint]}
    if origin in (typing.Union, types.UnionType):
        return {
            "anyOf": [_json_schema(a) if a is not type(None) else {"type": "null"} for a in args]
        }
    if origin is list or hint is list:
        return {"type": "array", **({"items": _json_schema(args[0])} if args else {})}
    if origin is dict or hint is dict:
        return {
            "type": "object",
            **({"additionalProperties": _json_schema(args[1])} if args else {}),
        }
    raise TypeError(f"no JSON Schema for {hint!r}")


def schema_of(cls, title: str) -> dict:
    """The JSON Schema of a dataclass, declared by it alone: each field's type hint, its
    `metadata["schema"]` (enum, const, pattern, description) on top; required: the fields
    without a default, and those whose metadata says `required`."""
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": title,
        "type": "object",
        "additionalProperties": False,
        "required": [
            f.name
            for f in fields
            if f.metadata.get("required")
            or (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
        ],
        "properties": {
            f.name: {**_json_schema(hints[f.name]), **f.metadata.get("schema", {})} for f in fields
        },
    }


def validate(data, schema_name: "str | dict", path: Path, fix: str):
    """Validate `data` read from `path` against schemas/<schema_name>.json (or a schema
    itself), filling defaults; return it."""
    if data is None:
        raise ClimstackError(f"{path} is empty", fix=fix)
    validator = DefaultFillingValidator(
        schema(schema_name) if isinstance(schema_name, str) else schema_name
    )
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        what, expected = _describe(error)
        raise ClimstackError(
            f"{path}: key {_key_path(error)}: {what}", fix="; ".join(filter(None, [expected, fix]))
        )
    return data


def check_format(data, schema_name: str, path: Path, fix: str) -> None:
    """The file's `format:` against the one its schema reads, checked before the rest (as
    stackinator checks a recipe's version first): a file of another format gets the fix
    for its format, not the schema errors of every key that moved."""
    wanted = schema(schema_name)["properties"]["format"]["const"]
    found = data.get("format") if isinstance(data, dict) else None
    if found != wanted:
        raise ClimstackError(
            f"{path}: key format: {'missing' if found is None else repr(found)}, "
            f"this climstack reads `format: {wanted}`",
            fix=fix,
        )


def load_yaml(path: Path, schema_name: str, fix: str, format_fix: str | None = None):
    """A YAML file, validated against schemas/<schema_name>.json with defaults filled;
    given `format_fix`, its `format:` is checked first (check_format)."""
    data = parse_yaml(path, fix)
    if format_fix is not None and data is not None:
        check_format(data, schema_name, path, format_fix)
    return validate(data, schema_name, path, fix)


def load_json(path: Path, schema_name: "str | dict", fix: str):
    return validate(parse_json(path, fix), schema_name, path, fix)
