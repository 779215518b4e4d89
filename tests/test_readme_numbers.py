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


# Words the README may only use where the report backs them (issue 51): a claim over every data
# set, instance or seed holds only where every answer of that question has a verdict; a claim of
# "no verdict" only where some answer has none.
EVERY = re.compile(r"\b(?:every|all|each)(?:\s+(?:of\s+the\s+)?\w+)?\s+"
                   r"(?:data\s+sets?|instances?|seeds?|answers?|problems?)\b", re.IGNORECASE)
UNDECIDED = re.compile(r"\b(?:no|without a) verdict\b", re.IGNORECASE)
DECIDED = re.compile(r"Verdict: (?:faster|slower|equivalent)")


def groups(text: str) -> dict[str, list[str]]:
    """Top-level bullets with a bold lead, by the lead's first word ("Q1", "Logistic") -> the
    bullet's text, its nested bullets split apart."""
    out: dict[str, list[str]] = {}
    for bullet in re.split(r"\n(?=- \*\*)", text):
        lead = re.match(r"- \*\*(\w+)", bullet)
        if lead:
            out[lead[1]] = re.split(r"\n\s+- ", bullet)
    return out


def unbacked_words(readme: str, answers: str) -> list[str]:
    report = groups(answers)
    wrong = []
    for lead, (bullet, *_) in groups(readme).items():
        claimed = report.get(lead, [""])[1:]  # the answers under the report's question
        for claim in EVERY.findall(bullet):
            if not claimed or not all(DECIDED.search(answer) for answer in claimed):
                wrong.append(f"{lead}: '{claim}', where some answer has no verdict")
        if UNDECIDED.search(bullet) and all(DECIDED.search(a) for a in claimed):
            wrong.append(f"{lead}: 'no verdict', where every answer has one")
    return wrong


def test_the_readmes_words_are_backed_by_the_reports_verdicts():
    assert not unbacked_words(section(README.read_text(), "What it found"),
                              the_reports_answers())


def test_the_word_check_catches_a_claim_over_every_data_set():
    answers = ("\n- **Logistic regression: which first?**\n  - on a: Verdict: faster, decided\n"
               "  - on b: Verdict: no verdict after 3 instances\n")
    assert unbacked_words("\n- **Logistic regression.** L-BFGS was first on every data set.",
                          answers) == ["Logistic: 'every data set', where some answer has no "
                                       "verdict"]
    assert unbacked_words("\n- **Logistic regression.** First on all three data sets; one "
                          "has no verdict.", answers) != []
    assert unbacked_words("\n- **Logistic regression.** First on two of the three; one has no "
                          "verdict.", answers) == []
    assert unbacked_words("\n- **Logistic regression.** no verdict",
                          answers.replace("no verdict after", "faster, decided")) != []
