"""Each command-line option written once: its click parameter, its check and its options-dataclass field.

A verb's options are a frozen dataclass whose fields are written with `option(...)` or `argument(...)`
(or a shared one from gpuprov.host_options): a field carries the click parameter(s) it is read from and
`parse`, which checks the raw value and turns it into the field's value. `OptionSet(cls)` then gives
the verb two things:

- used as a decorator under `@click.command`, it adds every field's click parameters to the command and
  calls it with the built dataclass: `def launch(opts: LaunchOptions) -> None`;
- `.build(raw)` builds the same dataclass from a mapping of raw values (tests, scripts).

A rule between fields (--nodes with --hosts, a script looked up in --workdir) goes in OptionSet's
`finish`. A wrong value is one line through BadInput (exit 2): `parse` raises BadInput itself, or
`Invalid(reason)` for the line "--name VALUE is not valid: reason". Light on purpose (click only): help and
input errors load nothing that reaches a host.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Concatenate, Generic, Literal, TypeVar, cast

import click

from gpuprov.errors import BadInput

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")
V = TypeVar("V")
Opts = TypeVar("Opts", bound="DataclassInstance")

_SPEC = "gpuprov.cli_options"  # the key of a field's metadata that holds its _Spec


class Invalid(ValueError):
    """A check's reason alone; the option set writes the line '--name VALUE is not valid: reason'."""


@dataclasses.dataclass(frozen=True)
class Param:
    """One click parameter a field is read from: an option ('-i', '--inventory') or an argument."""

    kind: Literal["option", "argument"]
    decls: tuple[str, ...]
    attrs: Mapping[str, Any]  # click's keywords: default, type, help, is_flag, multiple, metavar, ...
    name: str | None = None  # the keyword click passes it as (and build's key); None: the field's name

    def key(self, field_name: str) -> str:
        return self.name or field_name

    def label(self, field_name: str) -> str:
        """How a message names it: its long option, or the argument's metavar."""
        if self.kind == "argument":
            return str(self.attrs.get("metavar") or self.key(field_name).upper())
        return max(self.decls, key=len)

    def default(self) -> object:
        """The raw value click gives when the parameter is not on the command line."""
        if "default" in self.attrs:
            return self.attrs["default"]
        if self.attrs.get("multiple") or self.attrs.get("nargs") == -1:
            return ()
        return False if self.attrs.get("is_flag") else None

    def required(self) -> bool:
        if self.kind == "option":
            return bool(self.attrs.get("required", False))
        return bool(self.attrs.get("required", "default" not in self.attrs and self.attrs.get("nargs") != -1))

    def make(self, field_name: str) -> click.Parameter:
        if self.kind == "argument":
            return click.Argument([self.key(field_name)], **self.attrs)
        return click.Option([*self.decls, self.key(field_name)], **self.attrs)


@dataclasses.dataclass(frozen=True)
class _Spec:
    params: tuple[Param, ...]
    parse: Callable[..., object]  # called with each param's raw value, in order


def field(*params: Param, parse: Callable[..., T]) -> T:
    """A dataclass field read from `params` (parse gets their raw values in order). Its dataclass default
    is parse of the parameters' defaults, unless one of them is required."""
    spec = _Spec(params, parse)
    if any(p.required() for p in params):
        return cast(T, dataclasses.field(metadata={_SPEC: spec}))
    defaults = [p.default() for p in params]
    return dataclasses.field(default_factory=lambda: parse(*defaults), metadata={_SPEC: spec})


def option(*decls: str, parse: Callable[[Any], T], **attrs: Any) -> T:
    """A field read from one click option: option("--steps", type=int, default=None, help=..., parse=...)."""
    return field(Param("option", decls, attrs), parse=parse)


def argument(*, parse: Callable[[Any], T], **attrs: Any) -> T:
    """A field read from one click argument (named after the field)."""
    return field(Param("argument", (), attrs), parse=parse)


def flag(*decls: str, help: str) -> bool:
    return option(*decls, is_flag=True, help=help, parse=bool)


class OptionSet(Generic[Opts]):
    """The options of a verb: a decorator for its click command, and `build` for tests and scripts."""

    def __init__(self, cls: type[Opts], finish: Callable[[Opts], Opts] | None = None) -> None:
        self.cls = cls
        self.finish = finish
        self.fields = [
            (f.name, cast(_Spec, f.metadata[_SPEC])) for f in dataclasses.fields(cls) if _SPEC in f.metadata
        ]
        self.keys = {p.key(name) for name, spec in self.fields for p in spec.params}

    def build(self, raw: Mapping[str, object]) -> Opts:
        """The options from raw values keyed as click passes them (a missing one: its default); every
        field's parse in field order, then finish. BadInput (one line) for the first wrong value."""
        unknown = sorted(set(raw) - self.keys)
        if unknown:
            raise TypeError(f"{self.cls.__name__} has no option {', '.join(unknown)}")
        values: dict[str, object] = {}
        for name, spec in self.fields:
            missing = [p.key(name) for p in spec.params if p.required() and p.key(name) not in raw]
            if missing:
                raise TypeError(f"{self.cls.__name__}: {', '.join(missing)} is required")
            given = [raw.get(p.key(name), p.default()) for p in spec.params]
            values[name] = _parsed(name, spec, given)
        opts = self.cls(**values)
        return self.finish(opts) if self.finish is not None else opts

    def __call__(self, command: Callable[Concatenate[Opts, ...], None]) -> Callable[..., None]:
        """Decorate a click command function: it gets the built options first (other parameters, of
        click decorators below this one, as keywords after them)."""

        @functools.wraps(command)
        def run(**given: object) -> None:
            raw = {key: given.pop(key) for key in self.keys if key in given}
            command(self.build(raw), **given)

        # click lists a command's parameters in the reverse order of __click_params__ (decorators apply
        # bottom-up): ours go after those of the decorators below, reversed, to show in field order here.
        below: list[click.Parameter] = list(getattr(command, "__click_params__", []))
        run.__click_params__ = [*below, *reversed(list(self.params()))]  # type: ignore[attr-defined]
        return run

    def params(self) -> Iterable[click.Parameter]:
        """Fresh click parameters of every field, in field order."""
        return [p.make(name) for name, spec in self.fields for p in spec.params]


def _parsed(name: str, spec: _Spec, given: list[object]) -> object:
    try:
        return spec.parse(*given)
    except Invalid as exc:
        shown = next((value for value in given if value is not None), given[0])
        raise BadInput(f"{spec.params[0].label(name)} {shown!r} is not valid: {exc}") from None


# ----- checks for parse ------------------------------------------------------------------------------


def at_least(least: int) -> Callable[[int], int]:
    def check(value: int) -> int:
        if value < least:
            raise Invalid(f"give {least} or more")
        return value

    return check


def one_of(choices: Iterable[str]) -> Callable[[str], str]:
    names = tuple(choices)
    listed = " or ".join(names) if len(names) == 2 else ", ".join(names)

    def check(value: str) -> str:
        if value not in names:
            raise Invalid(f"choose {listed}")
        return value

    return check


def optional(check: Callable[[V], T]) -> Callable[[V | None], T | None]:
    """check, for a value that may be absent (None stays None)."""

    def checked(value: V | None) -> T | None:
        return None if value is None else check(value)

    return checked
