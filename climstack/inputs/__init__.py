"""Read the project's input files, checked: YAML or JSON, validated against a JSON Schema
that also fills in defaults. Bad input becomes one ClimstackError naming the file, the
key path, what was expected and the fix, never a traceback."""

import copy
import functools
import json
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


def validate(data, schema_name: str, path: Path, fix: str):
    """Validate `data` read from `path`, filling defaults; return it."""
    if data is None:
        raise ClimstackError(f"{path} is empty", fix=fix)
    validator = DefaultFillingValidator(schema(schema_name))
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        what, expected = _describe(error)
        raise ClimstackError(
            f"{path}: key {_key_path(error)}: {what}", fix="; ".join(filter(None, [expected, fix]))
        )
    return data


def load_yaml(path: Path, schema_name: str, fix: str):
    """A YAML file, validated against schemas/<schema_name>.json with defaults filled."""
    return validate(parse_yaml(path, fix), schema_name, path, fix)


def load_json(path: Path, schema_name: str, fix: str):
    return validate(parse_json(path, fix), schema_name, path, fix)
