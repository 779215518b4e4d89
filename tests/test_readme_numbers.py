"""The README's "What it found" quotes the reference report (docs/reference-report/report.md):
every number it quotes appears in the report's Answers section, and its figures are ones the
report shows, so neither can drift without the other (issue 46).

A number is a figure a reader takes as measured: digits, with a unit or ratio mark if one
follows (5.6x, 38.5 ms, 492 MB, 1e-8). Digits inside a name (Q1, TF1, float32, 1M-row, H200)
and inside code spans, link targets and dates are not quotes. Numbers are compared by value and
unit, so the README's 1e-8 is the report's 1e-08.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
REPORT = ROOT / "docs" / "reference-report" / "report.md"
NUMBER = re.compile(r"(?<![\w.\-])(\d+(?:\.\d+)?(?:e-?\d+)?)(?:\s?(x|ms|s|min|MB|GB|%))?(?!\w)")


def section(text: str, heading: str) -> str:
    """From `## heading` to the next `## ` heading."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


def quoted(text: str) -> dict[tuple[float, str], str]:
    """Each number of `text` by value and unit -> as written."""
    text = re.sub(r"`[^`]*`", " ", text)  # code spans: names and commands
    text = re.sub(r"\b\d{4}-\d{2}-\d{2}\b", " ", text)  # dates: when, not what was measured
    text = re.sub(r"\]\([^)]*\)", "]", text)  # link and image targets
    return {(float(m[1]), m[2] or ""): m[0] for m in NUMBER.finditer(text)}


def numbers(text: str) -> set[tuple[float, str]]:
    return set(quoted(text))


def the_reports_answers() -> str:
    return section(REPORT.read_text(), "Answers")


def test_every_number_the_readme_quotes_is_in_the_reference_reports_answers():
    found = quoted(section(README.read_text(), "What it found"))
    assert len(found) >= 10, found  # the section quotes the report, not only links to it
    missing = {written for key, written in found.items()
               if key not in numbers(the_reports_answers())}
    assert not missing, f"the README quotes {sorted(missing)}, which the reference report lacks"


def test_the_readmes_headline_figure_is_the_reference_reports():
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", section(README.read_text(),
                                                             "What it found"))
    assert images, "What it found shows no figure"
    shown = {(REPORT.parent / link).resolve()
             for link in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", REPORT.read_text())}
    for image in images:
        assert (ROOT / image).resolve() in shown, f"{image} is not a figure of the report"


def test_the_number_reader_skips_names_and_compares_by_value():
    assert quoted("Q1 and TF1 in float32 on 1M-row data, `tf.constant(3)`, [x](a/2.png), H200, "
                  "2026-12-05") == {}
    assert numbers("5.6x [4.35x, 8.32x], 38.5 ms in 7 iterations to 1e-8, 492 MB") == {
        (5.6, "x"), (4.35, "x"), (8.32, "x"), (38.5, "ms"), (7.0, ""), (1e-8, ""),
        (492.0, "MB")}
    assert numbers("1e-08") == numbers("1e-8")
