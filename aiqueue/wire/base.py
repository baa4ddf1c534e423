"""The one way a request is parsed and an answer serialised.

A request type is a `Wire` model whose fields carry the rules of rules.py as
before-validators: a rule raises the contract's 4xx itself (its sentence
names the field, never the value sent), and whatever pydantic still finds
becomes one `Invalid` (422) here.  Nothing is echoed: pydantic's own
messages name the type expected, and the input it keeps is dropped.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, model_validator

from aiqueue.errors import Invalid

W = TypeVar("W", bound="Wire")


class Wire(BaseModel):
    """A request or an answer of the API, as its JSON shape."""

    # Built on first use, not at import: an entry point that never parses a
    # webhook pays nothing for its type (Vercel cold starts).
    model_config = ConfigDict(defer_build=True, frozen=True)
    # The 422 for a body that is not a JSON object at all.
    NOT_OBJECT: ClassVar[str] = "the body must be a JSON object"

    @model_validator(mode="before")
    @classmethod
    def _object_with_its_fields(cls, data: Any) -> Any:
        """Refuse a non-object, and run a missing required field's rule (its own 422)."""
        if not isinstance(data, dict):
            raise Invalid(cls.NOT_OBJECT)
        for name, field in cls.model_fields.items():
            if field.is_required() and name not in data:
                for rule in field.metadata:
                    if isinstance(rule, BeforeValidator):
                        rule.func(None)  # type: ignore[call-arg]
        return data


def parse(model: type[W], data: object) -> W:
    """`data` as a `model`, or Invalid (422) naming the first field that does not fit."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        # A location names fields (and list positions), never a value sent.
        where = ".".join(str(p)[:64] for p in first["loc"]) or "the body"
        if first["type"] == "extra_forbidden":
            raise Invalid(f"unknown field: {where}") from None
        raise Invalid(f"{where}: {first['msg'][:1].lower()}{first['msg'][1:]}") from None


# What a route that takes no body reads when none was sent (a JSON `null` is a body).
NO_BODY = object()


def no_fields(body: object) -> None:
    """A route that takes no body: nothing (`NO_BODY`) or `{}` pass; anything else is
    Invalid (422), naming the fields sent (their names only, never a value)."""
    if body is NO_BODY or body == {}:
        return
    if not isinstance(body, dict):
        raise Invalid("this route takes no body: send none or {}")
    names = sorted(str(name)[:64] for name in body)
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    # As `parse` words an unknown field: the route's body has none it knows.
    raise Invalid(f"unknown field{'s' if len(names) > 1 else ''}: {shown}")


def dump(answer: Wire) -> dict[str, Any]:
    """An answer as JSON values; fields it never set (optional in the description) are left out."""
    return answer.model_dump(mode="json", exclude_unset=True)

