"""`python -m study compare A B`: what changed between two results folders of one study (two
machines, two commits, two environments).

First what differs between the two (fingerprints, machine, versions, commits); then each
configuration's time in B over A, paired on the instances both ran (study.paired); then each
conclusion the report states, derived in both: held, changed, or cannot be told apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from convergence_study.errors import InputError
from study.conclusions import Conclusion, conclusions
from study.output import check_output_path, reading, write_atomic
from study.paired import Comparison, compare, times
from study.report.build import env_values
from study.results import Results, code_versions, load

HELD, CHANGED, UNTOLD = "held", "changed", "cannot be told apart"
FIGURE_ROWS = 40  # the figure draws every distinguishable change and the largest of the rest


@dataclass(frozen=True)
class Change:
    """One configuration's quantity, B over A, paired on the instances both ran."""

    config: str
    quantity: str
    comparison: Comparison

    @property
    def distinguishable(self) -> bool:
        return self.comparison.distinguishable


# ---- pairing configurations -------------------------------------------------------------------

def measurements(results: Results) -> tuple[pd.DataFrame, list[str], dict[str, str]]:
    """(rows with a `config` label, instance columns, quantity name -> column): the plugin's
    `pairs`."""
    found = results.plugin.pairs(results.runs[results.runs["status"] != "skipped"])
    if found is None:
        raise InputError(f"'{results.folder}': a {results.kind} study has nothing to compare")
    return found


def configuration_changes(a: Results, b: Results) -> tuple[list[Change], list[str], list[str]]:
    """Each configuration both ran, B over A; and the configurations only A, only B ran. With
    the plugin's FIRST_REACHED, the time to the target, or per step where neither reached it."""
    rows_a, instance, quantities = measurements(a)
    rows_b, _, _ = measurements(b)
    groups_a = dict(tuple(rows_a.groupby("config", sort=True)))
    groups_b = dict(tuple(rows_b.groupby("config", sort=True)))
    common = [c for c in groups_a if c in groups_b]
    changes = []
    for config in common:
        sides = (groups_b[config], groups_a[config])  # B over A
        chosen = list(quantities.items())
        if a.plugin.FIRST_REACHED:  # time to target, else per step
            reached = any(np.isfinite(side[chosen[0][1]]).any() for side in sides)
            chosen = chosen[:1] if reached else chosen[1:]
        for quantity, column in chosen:
            c = compare(*(side.dropna(subset=[column]) for side in sides), instance, column)
            if c.instances:
                changes.append(Change(config, quantity, c))
    return (changes, sorted(set(groups_a) - set(groups_b)), sorted(set(groups_b) - set(groups_a)))


# ---- conclusions in both ----------------------------------------------------------------------

def verdict(a: Conclusion, b: Conclusion) -> str:
    """Held: the same claim. Changed: two claims, each backed by its interval, that differ.
    Cannot be told apart: they differ and one side's interval holds 1."""
    if a.claim == b.claim:
        return HELD
    return CHANGED if a.firm and b.firm else UNTOLD


def conclusion_changes(a: list[Conclusion], b: list[Conclusion]):
    """[(id, verdict, A's conclusion or None, B's or None)] in A's order, then B's own."""
    by_id = {c.id: c for c in b}
    out = [(c.id, verdict(c, by_id[c.id]) if c.id in by_id else "only in A", c,
            by_id.get(c.id)) for c in a]
    seen = {c.id for c in a}
    return out + [(c.id, "only in B", None, c) for c in b if c.id not in seen]


# ---- what differs -----------------------------------------------------------------------------

def _values(runs: pd.DataFrame, column: str) -> str:
    return env_values([runs], column) or "not recorded"


def changed_files(a: Results, b: Results) -> tuple[str, str]:
    """The source files that differ between the code that measured A and B, with each side's
    short digests."""
    files_a, files_b = code_versions(a.runs, a.folder), code_versions(b.runs, b.folder)
    if not files_a or not files_b:
        return "not recorded", "not recorded"
    differ = sorted(p for p in set(files_a) | set(files_b) if files_a.get(p) != files_b.get(p))
    if not differ:
        return "the same", "the same"

    def side(files):
        return ", ".join(f"{p} ({'/'.join(d[:8] for d in sorted(files[p]))})" if p in files
                         else f"{p} (not used)" for p in differ)
    return side(files_a), side(files_b)


def differences(a: Results, b: Results) -> tuple[list[tuple[str, str, str]], list[str]]:
    """[(item, A's value, B's value)] for what differs, then the names of what is the same."""
    items = [("code fingerprint", a.code, b.code), ("code files", *changed_files(a, b))]
    items += [(name, _values(a.runs, column), _values(b.runs, column)) for name, column in
              (("environment fingerprint", "env_fingerprint"), ("git commit", "env_git_commit"))]
    env = sorted({c for c in (*a.runs.columns, *b.runs.columns)
                  if c.startswith("env_") and c not in ("env_fingerprint", "env_git_commit")})
    items += [(c[4:], _values(a.runs, c), _values(b.runs, c)) for c in env]
    differ = [(n, x, y) for n, x, y in items if x != y]
    same = [n for n, x, y in items if x == y and x not in ("not recorded", "unknown")]
    return differ, same


# ---- the command ------------------------------------------------------------------------------

def check_comparable(a: Results, b: Results) -> None:
    """Two folders of one study, or one line naming why not."""
    def study(results):
        names = sorted({str(s) for s in results.runs.get("study", pd.Series()).dropna()})
        runs = results.runs[results.runs["status"] != "skipped"]
        return results.plugin.title(runs), "/".join(names) or None

    (kind_a, name_a), (kind_b, name_b) = study(a), study(b)
    if kind_a != kind_b or (name_a and name_b and name_a != name_b):
        def what(kind, name):
            return f"{name} ({kind})" if name and name != kind else kind

        raise InputError(f"'{a.folder}' holds a {what(kind_a, name_a)} study and '{b.folder}' "
                         f"a {what(kind_b, name_b)} study; compare needs two results of the "
                         "same study")


@dataclass
class FolderComparison:
    """Everything the command prints, from A to B."""

    a: Results
    b: Results
    differ: list
    same: list
    changes: list[Change]
    only_a: list[str]
    only_b: list[str]
    conclusions: list


def compare_folders(folder_a, folder_b) -> FolderComparison:
    a, b = load(folder_a), load(folder_b)
    check_comparable(a, b)
    changes, only_a, only_b = configuration_changes(a, b)
    if not changes:
        raise InputError(f"'{a.folder}' and '{b.folder}' share no configuration measured on "
                         "a common instance; nothing to compare")
    differ, same = differences(a, b)
    return FolderComparison(a, b, differ, same, changes, only_a, only_b,
                            conclusion_changes(conclusions(a), conclusions(b)))


def interval(c: Comparison | None) -> str:
    if c is None or c.low != c.low:
        return "no interval"
    return f"[{times(c.low, '–')}, {times(c.high, '–')}]"


def unfinished(c: Comparison) -> str:
    """What an infinite or zero ratio means: one side did not reach the target."""
    return "did not finish in B" if c.ratio > 0 else "did not finish in A"


def change_word(change: Change) -> str:
    c = change.comparison
    if not change.distinguishable:
        return "within the noise"
    if not np.isfinite(c.ratio) or c.ratio == 0:
        return unfinished(c)
    return "slower in B" if c.ratio > 1 else "faster in B"


def ordered(changes: list[Change]) -> list[Change]:
    """Distinguishable changes first, then by how far the ratio is from 1."""
    def distance(change):
        ratio = change.comparison.ratio
        return np.inf if not np.isfinite(ratio) or ratio <= 0 else abs(np.log(ratio))
    return sorted(changes, key=lambda c: (not c.distinguishable, -distance(c), c.config))


def _state(c: Conclusion | None) -> str:
    """A conclusion's claim and number in a few words."""
    if c is None:
        return "–"
    if c.comparison is None or c.claim == "neither reached":
        return c.claim
    number = f"{times(c.comparison.ratio, '–')} {interval(c.comparison)}"
    if c.id.startswith("fastest."):
        return f"{c.claim} ({number} of the next)"
    return f"{number}, {c.claim}"


def change_rows(result: FolderComparison) -> list[tuple[Change, str, str, str]]:
    """What both reports show of each configuration, in their order: (change, B/A, its
    interval, what it means)."""
    return [(change, times(change.comparison.ratio, "–"), interval(change.comparison),
             change_word(change)) for change in ordered(result.changes)]


def moved(result: FolderComparison) -> str:
    return f"{sum(c.distinguishable for c in result.changes)} of {len(result.changes)}"


def text_report(result: FolderComparison) -> str:
    a, b = result.a, result.b
    lines = [f"compare: A = {a.folder}, B = {b.folder} ({a.kind} study)", "",
             "What differs between A and B:"]
    width = max((len(n) for n, _, _ in result.differ), default=0)
    lines += [f"  {n:<{width}}  A: {x}" + f"\n  {'':<{width}}  B: {y}" for n, x, y in result.differ]
    if not result.differ:
        lines.append("  nothing recorded")
    lines.append(f"  the same in both: {', '.join(result.same) or 'nothing recorded'}")
    lines += ["", "Time per configuration, B over A, paired on the instances both ran "
                  "(median ratio, 95% interval); * = distinguishable:"]
    width = max(len(c.config) for c in result.changes)
    lines += [f"  {'*' if change.distinguishable else ' '} {change.config:<{width}}  "
              f"{ratio:>7} {ci:<22} {change.quantity}, {change.comparison.instances} "
              f"instances: {word}" for change, ratio, ci, word in change_rows(result)]
    lines.append(f"  {moved(result)} changed distinguishably"
                 + "".join(f"; only in {side}: {', '.join(names)}"
                           for side, names in (("A", result.only_a), ("B", result.only_b))
                           if names))
    lines += ["", "Conclusions, derived in A and in B:"]
    for word in (HELD, CHANGED, UNTOLD, "only in A", "only in B"):
        rows = [r for r in result.conclusions if r[1] == word]
        if not rows:
            continue
        lines.append(f"  {word} ({len(rows)}):")
        for id, _, ca, cb in rows:
            lines.append(f"    {id}: A {_state(ca)} | B {_state(cb)}")
            for side, conclusion in (("A", ca), ("B", cb)):
                if word != HELD and conclusion is not None:
                    lines.append(f"      {side}: {conclusion.sentence}")
    return "\n".join(lines)


def _row(*cells) -> str:
    """A Markdown table row, each cell's '|' escaped."""
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def markdown_report(result: FolderComparison) -> str:
    a, b = result.a, result.b
    parts = [f"### `study compare`: {a.kind} study, A = `{a.folder}`, B = `{b.folder}`", "",
             "**What differs**", ""]
    if result.differ:
        parts += ["| | A | B |", "|---|---|---|", *(_row(*d) for d in result.differ), ""]
    else:
        parts += ["Nothing recorded differs.", ""]
    parts += [f"The same in both: {', '.join(result.same) or 'nothing recorded'}.", ""]
    parts += [f"**Time per configuration, B over A** ({moved(result)} changed distinguishably; "
              "median ratio over the instances both ran, 95% interval)", "",
              "| configuration | quantity | B/A | 95% interval | instances | change |",
              "|---|---|---|---|---|---|"]
    parts += [_row(change.config, change.quantity, ratio, ci, change.comparison.instances,
                   f"**{word}**" if change.distinguishable else word)
              for change, ratio, ci, word in change_rows(result)]
    for side, names in (("A", result.only_a), ("B", result.only_b)):
        if names:
            parts += ["", f"Only in {side}: " + ", ".join(f"`{n}`" for n in names) + "."]
    parts += ["", "**Conclusions, derived in A and in B**", "",
              "| conclusion | A | B | verdict |", "|---|---|---|---|"]
    parts += [_row(id, _state(ca), _state(cb), f"**{word}**" if word == CHANGED else word)
              for id, word, ca, cb in result.conclusions]
    for id, word, ca, cb in result.conclusions:
        if word != HELD:
            parts += ["", f"`{id}` ({word}):"]
            parts += [f"- {side}: {c.sentence}" for side, c in (("A", ca), ("B", cb)) if c]
    return "\n".join(parts) + "\n"


def figure(result: FolderComparison):
    """B over A per configuration with its interval, on a log axis; past FIGURE_ROWS, the
    changes closest to 1 are left out (and counted)."""
    import matplotlib.pyplot as plt

    from study.figures import log_axis  # heavy: matplotlib

    shown = ordered(result.changes)[:FIGURE_ROWS]
    left_out = len(result.changes) - len(shown)
    shown = sorted(shown, key=lambda c: (np.nan_to_num(c.comparison.ratio, posinf=1e300),
                                         c.config))
    fig, ax = plt.subplots(figsize=(12, 1.3 + 0.24 * len(shown)))
    finite = np.array([v for c in shown for v in (c.comparison.ratio, c.comparison.low,
                                                  c.comparison.high)], dtype=float)
    finite = finite[np.isfinite(finite) & (finite > 0)]
    low, high = (finite.min(), finite.max()) if len(finite) else (0.5, 2.0)
    low, high = min(low, 1 / 1.2) / 1.3, max(high, 1.2) * 1.3
    for y, change in enumerate(shown):
        c = change.comparison
        color = ("#c0392b" if c.ratio > 1 else "#2471a3") if change.distinguishable \
            else "#7f8c8d"
        ratio = min(max(c.ratio, low), high) if np.isfinite(c.ratio) and c.ratio > 0 else \
            (high / 1.15 if c.ratio > 0 else low * 1.15)
        lo = min(max(c.low, low), ratio) if c.low == c.low else ratio
        hi = max(min(c.high, high), ratio) if c.high == c.high else ratio
        ax.errorbar(ratio, y, xerr=[[ratio - lo], [hi - ratio]], fmt="o", color=color, ms=4,
                    capsize=2, lw=1)
        if not np.isfinite(c.ratio) or c.ratio <= 0:  # at the edge, its words inside
            in_b = c.ratio > 0
            ax.annotate(unfinished(c), (ratio, y), xytext=(-8 if in_b else 8, 0),
                        textcoords="offset points", ha="right" if in_b else "left",
                        va="center", fontsize=7, color=color,
                        bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none"})
    ax.axvline(1, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlim(low, high)
    log_axis(ax.xaxis)
    ax.set_yticks(range(len(shown)), [c.config + ("" if c.quantity == "time to target" else
                                                  f" ({c.quantity.split(' (')[0]})")
                                       for c in shown], fontsize=7)
    ax.set_ylim(-0.7, len(shown) - 0.3)
    ax.set_xlabel("B over A (median ratio over common instances, 95% interval; log); "
                  "right of 1 = slower in B")
    ax.set_title(f"B over A, {result.a.folder.name}: {moved(result)} changed distinguishably "
                 "(red slower in B, blue faster, grey within the noise)"
                 + (f"; {left_out} closest to 1 not drawn" if left_out else ""),
                 fontsize=9)
    fig.tight_layout()
    return fig


def add_arguments(parser) -> None:
    parser.add_argument("a", metavar="A", help="a results folder, e.g. results/regression")
    parser.add_argument("b", metavar="B", help="a results folder of the same study (another "
                                               "machine, commit or environment)")
    parser.add_argument("--markdown", action="store_true",
                        help="print Markdown (for a pull request) instead of plain text")
    parser.add_argument("--figure", metavar="PATH",
                        help="also draw B over A per configuration, with intervals, sorted "
                             "(PNG, or SVG/PDF by the file's suffix)")


def main(args) -> int:
    reading(args.a, args.b)
    if args.figure:
        check_output_path(args.figure, "--figure")
        if Path(args.figure).suffix.lower() not in (".png", ".svg", ".pdf"):
            raise InputError(f"--figure '{args.figure}': give a .png, .svg or .pdf file name")
    result = compare_folders(args.a, args.b)
    if args.figure:  # again, with the configs and data files the folders were measured on
        check_output_path(args.figure, "--figure")
    print(markdown_report(result) if args.markdown else text_report(result))
    if args.figure:
        import matplotlib.pyplot as plt

        fig = figure(result)
        suffix = Path(args.figure).suffix.lower()[1:]
        try:
            write_atomic(args.figure, lambda tmp: fig.savefig(tmp, format=suffix, dpi=110,
                                                              bbox_inches="tight"))
        finally:
            plt.close(fig)
        if not args.markdown:
            print(f"figure: {args.figure}")
    return 0
