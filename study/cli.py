"""What the one-run commands (`regress`, `train`) read alike from their command lines."""

from __future__ import annotations

import ast

from convergence_study.errors import InputError

BOOLEANS = {"true": True, "false": False}


def key_values(items, flag: str) -> dict:
    """KEY=VALUE pairs; a value is a boolean written as TOML and people write it (true or false,
    in any case), else a Python literal where it parses as one, else a string."""
    params = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise InputError(f"{flag} '{item}' is not KEY=VALUE")
        if key in params:
            raise InputError(f"{flag} {key} is given twice; give it once")
        if text.strip().lower() in BOOLEANS:
            params[key] = BOOLEANS[text.strip().lower()]
            continue
        try:
            params[key] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            params[key] = text
        if isinstance(params[key], int) and not -2**63 <= params[key] < 2**63:
            raise InputError(f"{flag} {key}={text}: the integer does not fit 64 bits")
    return params
