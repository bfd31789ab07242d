"""Strict settings: a tree of frozen dataclasses filled from a YAML file and the environment.

A file holds sections (``collector:``, ``shipper:`` ...) of keys. The environment overrides
one key with ``GPUFLEET_<SECTION>__<KEY>`` (for example ``GPUFLEET_SHIPPER__URL``). Unknown
keys, wrong types and bad values raise ``ConfigError`` naming the key, the value and where
it came from (``environment variable GPUFLEET_X__Y: ...``, ``config file PATH: ...``); a
value is never silently ignored or coerced into something else.

The agent and the collector share the prefix, and often a host: each program passes the
other's settings class as ``foreign``, and variables of the other's sections are left to it.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")
ENV_PREFIX = "GPUFLEET_"


class ConfigError(Exception):
    """A configuration key is unknown, missing or has a bad value."""


def load_settings(
    cls: type[T],
    path: Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    foreign: Sequence[type] = (),
) -> T:
    """Build ``cls`` from the YAML file at ``path``, then ``environ``, then ``overrides``.

    ``overrides`` maps dotted keys (``"shipper.url"``) to already-typed values, for
    command-line flags. Later sources win. Environment variables of a section that
    ``foreign`` settings classes have and ``cls`` lacks belong to another program and are
    skipped; any other unknown one is an error.
    """
    raw: dict[str, Any] = read_yaml(path) if path is not None else {}
    origins = dict.fromkeys(_leaves(raw), f"config file {path}")
    skipped = _sections(foreign) - _sections([cls])
    for name, dotted, value in _env_items(environ or {}):
        if dotted.split(".", 1)[0] not in skipped:
            origins[dotted] = f"environment variable {name}"
            _named(origins[dotted], _set_dotted, raw, dotted, value)
    for dotted, value in (overrides or {}).items():
        if value is not None:
            origins[dotted] = "command line"
            _set_dotted(raw, dotted, value)
    try:
        return build(cls, raw, "")
    except ConfigError as err:
        source = _source_of(str(err), origins)
        if source is None:
            raise
        raise ConfigError(f"{source}: {err}") from err


def _sections(classes: Sequence[type]) -> set[str]:
    return {f.name for cls in classes for f in dataclasses.fields(cls)}


def _leaves(raw: Mapping[str, Any], where: str = "") -> list[str]:
    """The dotted keys of a file's values (a non-empty mapping is walked into)."""
    keys: list[str] = []
    for key, value in raw.items():
        dotted = _join(where, str(key))
        if isinstance(value, Mapping) and value:
            keys.extend(_leaves(value, dotted))
        else:
            keys.append(dotted)
    return keys


def _named(source: str, set_value: Any, *args: Any) -> None:
    try:
        set_value(*args)
    except ConfigError as err:
        raise ConfigError(f"{source}: {err}") from err


def _source_of(message: str, origins: Mapping[str, str]) -> str | None:
    """Where the key an error message starts with (``shipper.url: ...``) was set."""
    key = re.split(r"[\[:]", message, maxsplit=1)[0].strip()
    if not key or " " in key:
        return None
    if key in origins:
        return origins[key]
    above = [d for d in origins if key.startswith(f"{d}.")]  # a mapping set whole
    if above:
        return origins[max(above, key=len)]
    below = sorted(d for d in origins if d.startswith(f"{key}."))  # a section's key
    return origins[below[0]] if below else None


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read config file {path}: {err.strerror}") from err
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"config file {path} is not valid YAML: {err}") from err
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: expected a mapping at the top, got {_kind(data)}")
    return data


def _env_items(environ: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(variable name, dotted key, value) of every ``GPUFLEET_<SECTION>__<KEY>``."""
    items = []
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        parts = name[len(ENV_PREFIX) :].lower().split("__")
        items.append((name, ".".join(parts), value))
    return sorted(items, key=lambda item: item[1])


def _set_dotted(raw: dict[str, Any], dotted: str, value: Any) -> None:
    *sections, key = dotted.split(".")
    node = raw
    for section in sections:
        child = node.setdefault(section, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{dotted}: {section} is not a section")
        node = child
    node[key] = value


def build(cls: type[T], raw: Any, where: str) -> T:
    """Build dataclass ``cls`` from a mapping, naming ``where`` in every error."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where or 'config'}: expected a mapping, got {_kind(raw)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        known = ", ".join(sorted(fields))
        raise ConfigError(f"{_join(where, unknown[0])}: unknown key (known keys: {known})")
    values = {}
    for name, value in raw.items():
        values[name] = convert(hints[name], value, _join(where, name))
    try:
        return cls(**values)
    except TypeError as err:
        missing = [n for n, f in fields.items() if n not in values and _required(f)]
        raise ConfigError(f"{_join(where, missing[0]) if missing else where}: {err}") from err
    except ValueError as err:
        raise ConfigError(f"{where or 'config'}: {err}") from err


def convert(hint: Any, value: Any, where: str) -> Any:
    """Convert one value to ``hint``; strings from the environment are parsed."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        if isinstance(value, str) and value.lower() in ("", "none", "null") and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return convert(inner[0], value, where)
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(f"{where}: {value!r} is not one of {', '.join(map(repr, args))}")
        return value
    if dataclasses.is_dataclass(hint):
        return build(hint, _maybe_json(value), where)  # type: ignore[arg-type]
    if origin in (list, tuple):
        items = _maybe_list(value, where)
        item_hint = args[0] if args else Any
        converted = [convert(item_hint, v, f"{where}[{i}]") for i, v in enumerate(items)]
        return tuple(converted) if origin is tuple else converted
    if origin is dict:
        mapping = _maybe_json(value)
        if not isinstance(mapping, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {_kind(value)}")
        key_hint, value_hint = args or (str, Any)
        return {
            convert(key_hint, k, where): convert(value_hint, v, f"{where}.{k}")
            for k, v in mapping.items()
        }
    return _scalar(hint, value, where)


def _scalar(hint: Any, value: Any, where: str) -> Any:
    if hint is Any:
        return value
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on"):
            return True
        if isinstance(value, str) and value.lower() in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    if hint is int:
        if isinstance(value, bool):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: expected an integer, got {value!r}") from None
    if hint is float:
        if isinstance(value, bool):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: expected a number, got {value!r}") from None
        if number != number or number in (float("inf"), float("-inf")):
            raise ConfigError(f"{where}: expected a finite number, got {value!r}")
        return number
    if hint is str:
        if isinstance(value, bool):  # YAML 1.1 reads a bare yes/no/on/off as a boolean
            raise ConfigError(
                f"{where}: expected a string, got the boolean {value!r} (YAML reads a bare "
                f"on/off/yes/no/true/false as a boolean; quote the value)"
            )
        if not isinstance(value, str | int | float):
            raise ConfigError(f"{where}: expected a string, got {_kind(value)}")
        return str(value)
    if hint is Path:
        if not isinstance(value, str | Path):
            raise ConfigError(f"{where}: expected a path, got {_kind(value)}")
        return Path(value)
    raise ConfigError(f"{where}: unsupported setting type {hint!r}")


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value.strip().startswith(("{", "[")):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _maybe_list(value: Any, where: str) -> list[Any]:
    value = _maybe_json(value)
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list | tuple):
        return list(value)
    raise ConfigError(f"{where}: expected a list, got {_kind(value)}")


def _required(field: dataclasses.Field[Any]) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _kind(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"[:80]


def read_secret(value: str | None, file: Path | None, what: str) -> str | None:
    """A secret given inline (from the environment) or in a file; the file wins.

    Errors name ``what`` and the file, never the secret itself.
    """
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8").strip()
        except OSError as err:
            raise ConfigError(f"{what}: cannot read secret file {file}: {err.strerror}") from err
        if not text:
            raise ConfigError(f"{what}: secret file {file} is empty")
        return text
    return value or None
