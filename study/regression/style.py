"""One colour per optimizer family and one line style (and marker) per engine, the same in every
regression figure, so a reader learns the code once."""

from __future__ import annotations

import zlib

import pandas as pd

from study.frameworks.registry import BACKENDS

FAMILY_COLORS = {
    "gd": "#4c72b0", "momentum": "#64b5cd", "nesterov": "#8172b3", "adadelta": "#dd8452",
    "adadelta [original rule]": "#c44e52", "adam": "#da8bc3", "rmsprop": "#937860",
    "adagrad": "#a6761d", "lbfgs": "#55a868", "lbfgs-tfp": "#2f7d43", "scipy-lbfgs": "#ccb974",
    "cgls": "#17becf", "scipy-lsqr": "#bcbd22", "scipy-lsmr": "#e7298a", "closed-form": "#222222",
    "optax-lbfgs": "#0b6e4f",
}  # keyed by the names in optimizers.OPTIMIZERS; adagrad and LSMR were greys like OTHER_COLOR
OTHER_COLOR = "#999999"
# a name the table does not know (a user's own optimizer, optimizers.from_file) gets one of
# these, chosen by the name (stable across figures and runs), none of them a family's
SPARE_COLORS = ("#ff7f0e", "#d62728", "#1f77b4", "#9467bd", "#2ca02c", "#e377c2", "#8c564b",
                "#f0027f")
# a library class's lower-cased name -> the family it implements
LIBRARY_FAMILIES = {"sgd": "gd", "adam": "adam", "rmsprop": "rmsprop", "adagrad": "adagrad",
                    "adadelta": "adadelta", "lbfgs": "lbfgs"}

# engine (without the device) -> (line style, marker): each backend's declared styles, in the
# registry's order (study/frameworks/registry.py); an engine it does not declare gets one of
# SPARE_STYLES (never NumPy's solid line and circle)
ENGINE_STYLES = {engine: drawn for b in BACKENDS.values() for engine, drawn in b.styles.items()}
ENGINE_ORDER = tuple(dict.fromkeys(e for b in BACKENDS.values() for e in b.engines()))
SPARE_STYLES = tuple(zip([(0, (4, 2, 1, 2, 1, 2)), (0, (2, 3)), (0, (8, 3)), (0, (6, 1, 2, 1)),
                          (0, (1, 2, 4, 2)), (0, (3, 3, 1, 3))],
                         ["x", "|", "_", "4", "d", "p"], strict=True))


def family(row) -> str:
    """The optimizer family a configuration belongs to (keras:<Class> runs are their own)."""
    name = str(row["optimizer"])
    return f"{name} [original rule]" if "[original rule]" in str(row.get("method", "")) else name


def families(runs):
    """`family` of every row of a frame, as a Series also when it has no rows (where
    DataFrame.apply(family, axis=1) returns a frame that no column can take)."""
    return runs.apply(family, axis=1).astype(object) if len(runs) else \
        pd.Series(index=runs.index, dtype=object)


def color(name: str) -> str:
    if name in FAMILY_COLORS:
        return FAMILY_COLORS[name]
    if ":" in name:  # a library's class (keras:Adam, torch:LBFGS): its family's colour, darker
        base = FAMILY_COLORS.get(LIBRARY_FAMILIES.get(name.split(":", 1)[1].lower(), ""))
        if base is not None:
            red, green, blue = (int(base[i:i + 2], 16) for i in (1, 3, 5))
            return "#" + "".join(f"{int(c * 0.6):02x}" for c in (red, green, blue))
        return OTHER_COLOR
    if "[" in name:  # another method under the original rule ("gd [original rule]")
        return OTHER_COLOR
    return SPARE_COLORS[zlib.crc32(name.encode()) % len(SPARE_COLORS)]


def engine_key(engine: str) -> str:
    """'tf-fused+xla/gpu' -> 'tf-fused+xla'."""
    return engine.split("/")[0]


def engine_style(engine: str) -> tuple:
    """(line style, marker): declared, else a spare one chosen by the name (stable)."""
    key = engine_key(engine)
    if key in ENGINE_STYLES:
        return ENGINE_STYLES[key]
    return SPARE_STYLES[zlib.crc32(key.encode()) % len(SPARE_STYLES)]


def line_style(engine: str):
    return engine_style(engine)[0]


def marker(engine: str) -> str:
    return engine_style(engine)[1]


def engine_rank(engine: str) -> tuple:
    key = engine_key(engine)
    return (ENGINE_ORDER.index(key) if key in ENGINE_ORDER else len(ENGINE_ORDER), engine)
