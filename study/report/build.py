"""`python -m study report`: reports/report.md and a self-contained reports/report.html from
whatever study results exist. Every sentence that carries a number is generated from the tables,
never typed by hand; each study contributes its section."""

from __future__ import annotations

import importlib
from pathlib import Path

import pandas as pd

from study import REPORTED
from study.conclusions import conclusions
from study.frameworks.registry import FRAMEWORKS
from study.names import named_once
from study.output import check_output_folder, reading
from study.report.age import age_blocks
from study.report.blocks import Block, write_report
from study.results import load
from study.sweep.grid import TIMEOUT_ENDS
from study.sweep.plugin import ORIGINAL_QUESTIONS


def environment_table(*frames: pd.DataFrame) -> pd.DataFrame:
    rows = {}
    for frame in frames:
        for column in sorted(c for c in frame.columns if c.startswith("env_")):
            values = sorted({str(v) for v in frame[column].dropna()})
            if values:
                rows.setdefault(column[4:], set()).update(values)
    return pd.DataFrame({"item": list(rows), "value": ["; ".join(sorted(v)) for v in
                                                       rows.values()]})


def noise_sentence(runs: pd.DataFrame) -> str:
    """How many rows were measured while the machine was busy, and why."""
    if "noisy" not in runs or runs["noisy"].isna().all():
        return "No row carries a noise probe."
    noisy = runs[runs["noisy"].fillna(False).astype(bool)]
    probed = int(runs["noisy"].notna().sum())
    if noisy.empty:
        return f"Machine noise: none of the {probed} probed runs was flagged noisy."
    kinds = {"a slow calibration pass": "calibration", "threads waiting for a CPU": "waited",
             "other processes using the CPUs": "other processes"}
    counts = {kind: int(noisy["noisy_reason"].str.contains(word).sum())
              for kind, word in kinds.items()}
    why = ", ".join(f"{kind}: {n}" for kind, n in counts.items() if n)
    return (f"Machine noise: {len(noisy)} of {probed} probed runs were measured while the "
            f"machine was busy ({why});"
            " their timings are kept but marked, and `convergence-study run CONFIG "
            "--remeasure-noisy` measures them again.")


def ended_sentence(runs: pd.DataFrame) -> str | None:
    """How many runs a timeout ended before they ran (timeout_ends_configuration)."""
    if "message" not in runs or "status" not in runs:
        return None
    ended = runs[(runs["status"] == "skipped")
                 & runs["message"].fillna("").str.contains(TIMEOUT_ENDS, regex=False)]
    if ended.empty:
        return None
    return (f"{len(ended)} runs were not run: an earlier seed of their configuration had timed "
            f"out, and the config sets {TIMEOUT_ENDS} (a configuration that cannot reach the "
            "target in its budget is measured on one seed, not three; its other seeds are "
            "recorded skipped, saying so).")


def env_values(frames, column: str) -> str | None:
    """The distinct values of an env column over the measured rows, 'a / b'; None for none."""
    values = set()
    for frame in frames:
        if column in frame:
            measured = frame[frame["status"] != "skipped"] if "status" in frame else frame
            values.update(_text(v) for v in measured[column].dropna())
    return " / ".join(sorted(values)) or None


def _text(value) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# every registered framework's distributions: its own by its title, the others it records (such
# as keras or optax) by their distribution names; one that two frameworks record (keras:
# TensorFlow's, and Keras's own) once, as the first names it
_NAMED: dict[str, str] = {}
for _framework in FRAMEWORKS.values():
    for _package in _framework.packages:
        _NAMED.setdefault(f"env_{_package.replace('-', '_')}", _framework.title
                          if _package == _framework.packages[0] else _package)
# the NumPy stack, then the frameworks, then Python
VERSIONS = (("NumPy", "env_numpy"), ("SciPy", "env_scipy"),
            *((title, column) for column, title in _NAMED.items()), ("Python", "env_python"))


def machine_sentence(*frames: pd.DataFrame) -> str:
    """The machine and software behind the numbers, in one line."""
    def value(column, form, missing):
        found = env_values(frames, column)
        return form.format(found) if found else missing

    kernel = value("env_blas_kernel", "{} kernel", "kernel not recorded")
    versions = ", ".join(f"{name} {found}" for name, column in VERSIONS
                         if (found := env_values(frames, column)))
    return (f"Machine: {value('env_cpu', '{}', 'CPU not recorded')}, "
            f"{value('env_cores', '{} cores', 'cores not recorded')}, "
            f"{value('env_memory_gb', '{} GiB memory', 'memory not recorded')}, "
            f"{value('env_gpu', 'GPU {}', 'no GPU')}; "
            f"BLAS {value('env_blas', '{}', 'not recorded').replace('; ', ' and ')}, {kernel}"
            + (f"; {versions}" if versions else "") + ".")


def answer_blocks(found) -> list[Block]:
    """The answers the report opens with, grouped by question, each linked to its evidence."""
    questions: dict[str, list] = {}
    verdicts = []
    for results in found:
        for conclusion in conclusions(results):
            if conclusion.answer:
                questions.setdefault(conclusion.question, []).append(
                    (conclusion.sentence, conclusion.evidence))
                if conclusion.verdict is not None:
                    verdicts.append(conclusion.verdict)
    if not questions:
        return [Block("p", "No question of the studies could be answered from these results.")]
    blocks = [Block("answers", list(questions.items()))]
    if verdicts:
        open_ = [v for v in verdicts if not v.decided]
        blocks.append(Block("p", f"Verdicts: {len(verdicts) - len(open_)} of {len(verdicts)} "
                                 "compared answers decided by an anytime-valid 95% confidence "
                                 "sequence (valid after the instances added to decide them; "
                                 "docs/measurement.md)" + (
                                     f"; {len(open_)} without a verdict, each saying what "
                                     "stopped it." if open_ else ".")))
    return blocks


def report_title(found) -> str:
    """'Convergence study report', naming the original questions first where a study answers
    them, then each study's plugin's `subjects` (so a report on your own CSV says so)."""
    subjects = []
    for results in found:
        runs = results.runs[results.runs["status"] != "skipped"]
        for subject in results.plugin.subjects(runs):
            if subject == ORIGINAL_QUESTIONS:
                subjects.insert(0, subject)
            else:
                subjects.append(subject)
    subjects = list(dict.fromkeys(subjects))
    if not subjects:
        return "Convergence study report"
    return "Convergence study report: " + "; ".join(subjects[:3]) + (
        f" and {len(subjects) - 3} more" if len(subjects) > 3 else "")


def names_sentence(found) -> str | None:
    """What each short name of a file stands for (study.names), said once before the answers."""
    files = [f for results in found for f in results.plugin.named_files(results.runs)]
    return named_once(sorted(set(files)), "Files by their short names")


def figures_sentence(figures_root: Path, results) -> str | None:
    """Where a study's figures folder is missing, how to draw them."""
    folder = figures_root / results.folder.name
    if folder.is_dir():
        return None
    return (f"{results.folder.name}: no figures, '{folder}' does not exist; draw them with "
            f"`convergence-study figures {results.kind} --results {results.folder} --out "
            f"{folder}` and write the report again.")


def build_blocks(results_root: Path, figures_root: Path, studies) -> list[Block]:
    """The whole report from the named studies' results folders under `results_root`."""
    found = [load(results_root / name) for name in studies]
    blocks = [Block("h1", report_title(found)),
              Block("p", "Generated from the results tables; every number below is computed "
                         "from them."),
              *(Block("p", line) for line in [names_sentence(found)] if line),
              Block("h2", "Answers", anchor="answers"),
              *answer_blocks(found),
              Block("p", machine_sentence(*(r.runs for r in found))),
              *(Block("p", f"{r.folder.name}: {noise_sentence(r.runs)}") for r in found),
              *(Block("p", f"{r.folder.name}: {line}") for r in found
                if (line := ended_sentence(r.runs))),
              *(Block("p", line) for r in found if (line := figures_sentence(figures_root, r))),
              *age_blocks(found)]
    for results in found:
        blocks.append(Block("p", f"{results.folder.name}: {len(results.runs)} runs, based on "
                                 f"{results.provenance()}."))
        section = importlib.import_module(results.plugin.REPORT_MODULE).section
        blocks += section(results, figures_root / results.folder.name)
    blocks.append(Block("h2", "Environment"))
    blocks.append(Block("table", environment_table(*(r.runs for r in found))))
    return blocks


def add_arguments(parser) -> None:
    parser.add_argument("--results", default="results", help="folder holding the studies' "
                                                               "results folders")
    parser.add_argument("--studies", nargs="+", default=list(REPORTED),
                        help="which studies (folders under --results) the report covers "
                             f"(default: {' '.join(REPORTED)})")
    parser.add_argument("--figures", default="figures", help="folder holding <study>/*.png")
    parser.add_argument("--out", default="reports", help="where report.md and report.html go")


def main(args) -> int:
    reading(*(Path(args.results) / s for s in args.studies))
    check_output_folder(args.out, writes=("report.md", "report.html"))
    blocks = build_blocks(Path(args.results), Path(args.figures), args.studies)
    md, page = write_report(blocks, Path(args.out), blocks[0].content)
    missing = [s for s in args.studies if not (Path(args.figures) / s).is_dir()]
    print(f"report: {md} and {page}" + (f" (no figures for {', '.join(missing)}: "
                                        f"'{args.figures}/<study>' does not exist)"
                                        if missing else ""))
    return 0
