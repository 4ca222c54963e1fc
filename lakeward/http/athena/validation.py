"""AWS API requests, checked against the service's own model as botocore ships it.

``athena/2017-05-18/service-2.json`` (or Glue's): types, required members, lengths,
ranges, enums and patterns; a request that fails is refused as the service refuses it.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from botocore.loaders import Loader
from botocore.model import ServiceModel

from lakeward.errors import (
    InvalidRequest,
)


@functools.cache
def model(service: str = "athena") -> Any:
    return ServiceModel(Loader().load_service_model(service, "service-2"), service)


@functools.cache
def _pattern(java_regex: str) -> re.Pattern[str]:
    # AWS matches a pattern against the whole value (an IAM name with a space fails
    # "[\w+=,.@-]+"). The patterns are Java regexes over UTF-16, where a surrogate-pair
    # range stands for "any character beyond the BMP"; Python sees those as one code point.
    return re.compile(java_regex.replace(r"\uD800\uDC00-\uDBFF\uDFFF", r"\U00010000-\U0010FFFF"))


_JSON_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "structure": ((dict,), "an object"),
    "map": ((dict,), "an object"),
    "list": ((list,), "a list"),
    "string": ((str,), "a string"),
    "boolean": ((bool,), "a boolean"),
    "integer": ((int,), "an integer"),
    "long": ((int,), "an integer"),
    "double": ((int, float), "a number"),
}


def _invalid(path: str, value: object, constraint: str) -> InvalidRequest:
    shown = value if isinstance(value, str) else json.dumps(value)
    shown = "null" if value is None else f"'{shown[:100]}{'...' if len(shown) > 100 else ''}'"
    return InvalidRequest(
        f"1 validation error detected: Value {shown} at '{path}' failed to satisfy "
        f"constraint: Member must {constraint}"
    )


def _is_json(value: object, types: tuple[type, ...]) -> bool:
    # JSON's true is no number, though Python's bool is an int
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


def checked(shape: Any, value: Any, path: str) -> Any:
    """``value`` after checking it against ``shape``, with null members dropped.

    Unknown members are ignored rather than refused: newer SDKs send members that
    this server's copy of the model may not have yet.
    """
    kind, meta = shape.type_name, shape.metadata
    expected, noun = _JSON_TYPES.get(kind, ((object,), ""))
    if not _is_json(value, expected):
        raise _invalid(path, value, f"be {noun}")
    sized = kind in ("string", "list", "map")
    size, measure = (len(value), "length") if sized else (value, "value")
    ranged = sized or kind in ("integer", "long", "double")
    if ranged and "min" in meta and size < meta["min"]:
        raise _invalid(path, value, f"have {measure} greater than or equal to {meta['min']}")
    if ranged and "max" in meta and size > meta["max"]:
        raise _invalid(path, value, f"have {measure} less than or equal to {meta['max']}")
    if kind == "string" and shape.enum and value not in shape.enum:
        raise _invalid(path, value, f"satisfy enum value set: [{', '.join(shape.enum)}]")
    if kind == "string" and "pattern" in meta and not _pattern(meta["pattern"]).fullmatch(value):
        raise _invalid(path, value, f"satisfy regular expression pattern: {meta['pattern']}")
    if kind == "list":
        return [checked(shape.member, v, f"{path}.{i + 1}.member") for i, v in enumerate(value)]
    if kind == "map":
        return {k: checked(shape.value, v, f"{path}.{k}") for k, v in value.items()}
    if kind != "structure":
        return value
    prefix = f"{path}." if path else ""
    members = {}
    for name, member in shape.members.items():
        where = prefix + name[:1].lower() + name[1:]  # AWS names members in lowerCamel
        if value.get(name) is not None:
            members[name] = checked(member, value[name], where)
        elif name in shape.required_members:
            raise _invalid(where, None, "not be null")
    return members
