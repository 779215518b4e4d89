"""`python -m study figures STUDY`: a study's figures from its results tables (a plot never
re-runs anything), and what every figure shares: the style and an atomic save."""

from __future__ import annotations

import importlib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import seaborn as sns  # noqa: E402

from study.output import check_output_folder, reading, write_files_atomic  # noqa: E402
from study.results import load
from study.sweep.plugin import STUDIES

FAILED_MARKER = "x"
PNG_DPI = 110
STYLE = {"style": "whitegrid", "context": "paper", "font_scale": 1.1}


def log_axis(axis) -> None:
    """A log axis that stays legible at any span: over two decades or more, labels at the
    decades only; over a shorter span, plain numbers at 1, 2 and 5 times the decades, or three
    round values where fewer fit; decided when drawn. No minor ticks: the style draws none, and
    placing them cost most of a many-panel figure."""
    from matplotlib.ticker import LogFormatterSciNotation, LogLocator, MaxNLocator, NullLocator

    def short(view) -> bool:
        lo, hi = sorted(view)
        return lo > 0 and np.log10(hi / lo) < 2

    class Locator(LogLocator):
        def tick_values(self, vmin, vmax):
            if not short((vmin, vmax)):
                self.set_params(subs=(1.0,))
                return super().tick_values(vmin, vmax)
            low, high = sorted((vmin, vmax))
            decades = 10.0 ** np.arange(np.floor(np.log10(low)), np.ceil(np.log10(high)) + 1)
            round_values = np.outer(decades, (1.0, 2.0, 5.0)).ravel()
            if ((round_values >= low) & (round_values <= high)).sum() < 2:
                return MaxNLocator(nbins=3, steps=[1, 2, 5, 10]).tick_values(low, high)
            self.set_params(subs=(1.0, 2.0, 5.0))
            return super().tick_values(vmin, vmax)

    class Formatter(LogFormatterSciNotation):
        def __call__(self, x, pos=None):
            view = self.axis.get_view_interval()
            if short(view):  # enough digits to tell ticks of a narrow span apart
                lo, hi = sorted(view)
                digits = max(3, int(np.ceil(-np.log10((hi - lo) / hi))) + 2)
                return np.format_float_positional(x, precision=digits, unique=True,
                                                  fractional=False, trim="-")  # 1000, not 1e+03
            return super().__call__(x, pos)

    getattr(axis.axes, f"set_{axis.axis_name}scale")("log")
    axis.set_major_locator(Locator())
    axis.set_major_formatter(Formatter())
    axis.set_minor_locator(NullLocator())


def legend_outside(ax, below: bool = False, gap: float = 0.55, **kwargs):
    """The panel's legend outside the data: to the right of the panel or, `below`, `gap` inches
    under it (room for the tick labels and the x label)."""
    from matplotlib.transforms import ScaledTranslation

    if below:
        shifted = ax.transAxes + ScaledTranslation(0, -gap, ax.figure.dpi_scale_trans)
        place = {"loc": "upper center", "bbox_to_anchor": (0.5, 0.0),
                 "bbox_transform": shifted, "frameon": False}
    else:
        place = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0}
    if ax.get_legend() is not None:
        place["title"] = ax.get_legend().get_title().get_text() or None
    return ax.legend(**{**place, **kwargs})


def panel_title(text: str, width: int = 44) -> str:
    """A data set's label wrapped at its commas, so that panels' titles do not run together."""
    import textwrap

    return textwrap.fill(text.replace(",", ", "), width, break_long_words=False,
                         break_on_hyphens=False).replace(", ", ",")


def save(fig, folder: Path, name: str) -> list[Path]:
    """The figure as PNG and SVG, both written whole or neither, cropped to what is drawn.

    A layout pass of a many-panel figure takes seconds, so the crop is measured once for both
    formats, at the PNG's resolution (text is wider at 110 dpi than at 100), and the inert layout
    engine `tight_layout` leaves is dropped (savefig would lay the figure out again for it)."""
    from matplotlib.layout_engine import PlaceHolderLayoutEngine

    paths = [folder / f"{name}.png", folder / f"{name}.svg"]
    try:
        if isinstance(fig.get_layout_engine(), PlaceHolderLayoutEngine):
            fig.set_layout_engine(None)
        fig.set_dpi(PNG_DPI)
        crop = fig.get_tightbbox(fig.canvas.get_renderer()).padded(0.1)
        write_files_atomic({
            paths[0]: lambda tmp: fig.savefig(tmp, format="png", dpi=PNG_DPI, bbox_inches=crop),
            paths[1]: lambda tmp: fig.savefig(tmp, format="svg", bbox_inches=crop)})
    finally:
        plt.close(fig)
    return paths


def add_arguments(parser) -> None:
    parser.add_argument("study", choices=sorted(STUDIES), help="which study's figures to draw")
    parser.add_argument("--results", help="results folder (default results/<study>)")
    parser.add_argument("--out", help="figures folder (default figures/<study>)")


def main(args) -> int:
    out = Path(args.out or f"figures/{args.study}")
    folder = args.results or f"results/{args.study}"
    reading(folder)
    check_output_folder(out)
    results = load(folder, expected_kind=args.study)
    sns.set_theme(**STYLE)
    written = importlib.import_module(results.plugin.FIGURES_MODULE).draw(results, out)
    print(f"wrote {len(written)} figure files to {out} ({results.provenance()})")
    return 0
