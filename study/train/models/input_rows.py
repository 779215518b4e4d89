"""Rows that do not fit the model: the data's arrays reach the model as they are, so a mismatch
is one line naming both shapes and what to change (a leaf module: every model kind raises it)."""

from __future__ import annotations

from convergence_study.errors import InputError, failure_line


def input_mismatch(what: str, rows: tuple, expected: tuple | None,
                   exc: BaseException) -> InputError:
    """The one line for data rows of shape `rows` that the model cannot take. `expected`: the
    rows the model takes (a str for an open axis), None where it cannot be read (then the
    model's own error says it); channels last given to a channels-first model is a layout."""
    rows = tuple(int(d) for d in rows)
    if _fits(rows, expected):  # built for these rows, failing inside: its own words say why
        expected = None
    takes = f", which takes rows of shape {_shape(expected)}" if expected else ""
    line = f"the data's rows (shape {rows}) do not fit {what}{takes}"
    if len(rows) >= 2 and _fits((rows[-1], *rows[:-1]), expected):
        fix = ("the arrays are channels last and the model takes channels first: give layout "
               "= \"channels_first\" on the data block (--layout channels_first), which moves "
               "the channel axis once, before the clock")
    elif len(rows) >= 2 and _fits((*rows[1:], rows[0]), expected):
        fix = ("the model takes channels last: leave out layout = \"channels_first\" (or store "
               f"the arrays as {(*rows[1:], rows[0])} per row)")
    elif expected:
        fix = f"give rows of shape {_shape(expected)}, or a model built for {rows}"
    else:
        fix = (f"give a model built for rows of {rows}, or rows of the shape it takes (image "
               "arrays: layout = \"channels_first\" on the data block, --layout "
               "channels_first, moves the channel axis after the rows; channels_last, the "
               "default, keeps them as stored)")
    said = "" if expected and "layout" in fix else f" ({failure_line(exc)})"
    return InputError(f"{line}{said}: {fix}; the arrays reach the model as they are")


def _fits(rows: tuple, expected: tuple | None) -> bool:
    """Rows of this shape are what the model takes (an axis it leaves open takes any size)."""
    return bool(expected) and len(rows) == len(expected) and all(
        not isinstance(e, int) or e == d for d, e in zip(rows, expected, strict=True))


def _shape(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def build_failure(what: str, rows: tuple, outputs: int, exc: BaseException) -> InputError:
    """A model function that fails while building: the line names the input shape it was given
    (a channels-first model reading channels-last rows may fail as `math domain error`)."""
    rows = tuple(int(d) for d in rows)
    hint = ("; image rows are given channels last, as stored: a channels-first model needs "
            "layout = \"channels_first\" on the data block, --layout channels_first"
            if len(rows) == 3 else "")
    return InputError(f"{what} failed to build: {failure_line(exc)} (given input_shape "
                      f"{_shape(rows)} and {outputs} outputs{hint})")
