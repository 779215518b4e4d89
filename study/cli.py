"""What the one-run commands (`regress`, `train`) read alike from their command lines."""

from __future__ import annotations

import ast

from datasets.errors import InputError


def key_values(items, flag: str) -> dict:
    """KEY=VALUE pairs; a value is a Python literal where it parses as one, else a string."""
    params = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise InputError(f"{flag} '{item}' is not KEY=VALUE")
        if key in params:
            raise InputError(f"{flag} {key} is given twice; give it once")
        try:
            params[key] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            params[key] = text
        if isinstance(params[key], int) and not -2**63 <= params[key] < 2**63:
            raise InputError(f"{flag} {key}={text}: the integer does not fit 64 bits")
    return params
