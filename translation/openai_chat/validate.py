"""Small typed readers for client bodies: each returns the value or raises
:class:`ir.InvalidRequest` naming the field path."""

from __future__ import annotations

from typing import Any, NoReturn

from .. import ir


def fail(param: str, problem: str) -> NoReturn:
    raise ir.InvalidRequest(f"{param}: {problem}", param)


def obj(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        fail(path, "must be an object")
    return value


def opt_str(body: dict[str, Any], key: str, path: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        fail(path, "must be a string")
    return value


def req_str(body: dict[str, Any], key: str, path: str, *, empty: bool = False) -> str:
    value = body.get(key)
    if not isinstance(value, str) or (not empty and not value):
        fail(path, "must be a string" if empty else "must be a non-empty string")
    return value


def opt_bool(body: dict[str, Any], key: str, path: str | None = None) -> bool | None:
    value = body.get(key)
    if value is not None and not isinstance(value, bool):
        fail(path or key, "must be a boolean")
    return value


def opt_number(body: dict[str, Any], key: str, path: str | None = None) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        fail(path or key, "must be a number")
    return float(value)


def opt_int(body: dict[str, Any], key: str, path: str | None = None, *, minimum: int = 1) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        fail(path or key, "must be an integer")
    if value < minimum:
        fail(path or key, f"must be at least {minimum}")
    return value


def opt_list(body: dict[str, Any], key: str, path: str) -> list[Any]:
    value = body.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        fail(path, "must be an array")
    return value
