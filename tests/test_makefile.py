"""The Makefile's file targets: a full build leaves nothing to do, and touching one config
reruns only that study (checked with make's dry run on a copy whose files are stand-ins). Its
prerequisites are the plugins' own lists (`python -m study files`), asked of this checkout."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def age(path: Path, seconds_ago: float) -> None:
    stamp = time.time() - seconds_ago
    os.utime(path, (stamp, stamp))


# `python -m study files` of this checkout, each answer asked once per session (the copies'
# sources are empty stand-ins; the paths it prints are project-relative, so they name the copy's)
STUDY_FILES = """
import json, subprocess, sys
from pathlib import Path
cache = Path(sys.argv[1])
key = " ".join(sys.argv[2:])
known = json.loads(cache.read_text()) if cache.exists() else {}
if key not in known:
    known[key] = subprocess.run([sys.executable, "-m", "study", "files", *sys.argv[2:]],
                                cwd=%r, capture_output=True,
                                text=True, check=True).stdout
    cache.write_text(json.dumps(known))
print(known[key])
"""


@pytest.fixture(scope="session")
def study_files(tmp_path_factory) -> str:
    """The Makefile's STUDY_FILES for a copy: this checkout's answers, cached."""
    folder = tmp_path_factory.mktemp("study-files")
    (folder / "files.py").write_text(STUDY_FILES % str(ROOT))
    return f"{sys.executable} {folder / 'files.py'} {folder / 'cache.json'}"


@pytest.fixture
def built(tmp_path, study_files, monkeypatch):
    """A copy of the tree's Makefile inputs, with every output present and newer than them."""
    for path in [*ROOT.glob("*/*.py"), *ROOT.glob("study/*/*.py"), *ROOT.glob("study/*/*/*.py")]:
        if path.relative_to(ROOT).parts[0] in ("datasets", "optimizers", "study"):
            target = tmp_path / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("")
    for path in list(ROOT.glob("study/frameworks/*/*.py")) + list(ROOT.glob("configs/*.toml")):
        target = tmp_path / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("")
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    monkeypatch.setenv("STUDY_FILES", study_files)  # make reads it as its variable
    for name in ("pyproject.toml", "setup.py"):
        (tmp_path / name).write_text("")
    dry = subprocess.run(["make", "-n", "-B", "reports/report.md"], cwd=tmp_path,
                         capture_output=True, text=True, check=True).stdout
    outputs = ["results/regression/runs.parquet", "results/feedmode/runs.parquet",
               "results/logistic/runs.parquet",
               *[f"figures/{study}/{n}.png" for study in ("regression", "logistic") for n in (
                   "headline", "convergence_time", "convergence_iterations", "time_to_target",
                   "cost_tradeoff", "performance_profile", "regression_feed_modes")],
               "figures/feedmode/feedmode.png", "figures/feedmode/headline.png",
               "results/train/runs.parquet", "figures/train/convergence.png",
               "figures/train/headline.png", "reports/report.md", "reports/report.html"]
    for inputs in tmp_path.rglob("*"):
        if inputs.is_file():
            age(inputs, 1000)
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / ".installed").write_text("")
    age(tmp_path / ".venv" / ".installed", 900)
    for rank, name in enumerate(outputs):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
        age(path, 100 - rank)
    return tmp_path, dry


def make_dry(folder) -> str:
    return subprocess.run(["make", "-n", "reports/report.md"], cwd=folder, capture_output=True,
                          text=True, check=True).stdout


def test_full_build_leaves_nothing_to_do(built):
    folder, forced = built
    assert "study run configs/regression.toml" in forced  # the chain is real...
    assert "study feedmode --config configs/feedmode.toml" in forced
    assert "study run configs/logistic.toml" in forced
    assert "figures regression --results results/logistic" in forced
    assert "study" not in make_dry(folder)  # ...and a built tree has nothing to do
    code = subprocess.run(["make", "-q", "reports/report.md"], cwd=folder).returncode
    assert code == 0


def test_touching_one_config_reruns_only_that_study(built):
    folder, _ = built
    (folder / "configs" / "feedmode.toml").touch()
    plan = make_dry(folder)
    assert "study feedmode --config configs/feedmode.toml" in plan
    assert "figures feedmode" in plan and "study report" in plan
    assert "study run configs/regression.toml" not in plan
    assert "figures regression" not in plan
    (folder / "configs" / "logistic.toml").touch()
    plan = make_dry(folder)
    assert "study run configs/logistic.toml" in plan
    assert "figures regression --results results/logistic" in plan
    assert "study run configs/regression.toml" not in plan
    assert "figures regression --results results/regression" not in plan


def test_plot_code_redraws_without_rerunning(built):
    folder, _ = built
    (folder / "study" / "regression" / "figures.py").touch()
    (folder / "study" / "feedmode" / "figures.py").touch()
    plan = make_dry(folder)
    assert "figures regression" in plan and "figures feedmode" in plan
    assert "study run" not in plan and "study feedmode --config" not in plan


def test_measuring_code_reruns_the_studies_and_report_code_only_the_report(built):
    folder, _ = built
    (folder / "study" / "sweep" / "runner.py").touch()
    plan = make_dry(folder)
    assert "study run configs/regression.toml" in plan
    assert "study feedmode --config configs/feedmode.toml" in plan
    age(folder / "study" / "sweep" / "runner.py", 2000)
    (folder / "study" / "report" / "build.py").touch()
    plan = make_dry(folder)
    assert "study report" in plan and "study run" not in plan
    assert "figures regression" not in plan and "figures feedmode" not in plan


def test_make_full_announces_each_study_before_its_sweep(built):
    folder, _ = built
    plan = subprocess.run(["make", "-n", "full"], cwd=folder, capture_output=True, text=True,
                          check=True, env={**os.environ, "MAKEFLAGS": ""}).stdout.splitlines()
    studies = ("regression-full", "feedmode-full", "logistic-full", "train-full")
    lines = [plan.index(f"make full: study {n} of 4: {study} (configs/{study}.toml)")
             for n, study in enumerate(studies, 1)]
    assert lines == sorted(lines), plan
    for line, study in zip(lines, studies, strict=True):  # its sweep follows its line
        assert f"configs/{study}.toml --out results/{study}" in plan[line + 1], plan


def test_make_reference_report_gpu_stores_make_gpus_report_in_the_docs():
    plan = subprocess.run(["make", "-n", "reference-report-gpu"], cwd=ROOT, capture_output=True,
                          text=True, check=True, env={**os.environ, "MAKEFLAGS": ""}).stdout
    assert "study run configs/gpu.toml --require-gpu" in plan, plan
    assert "study report --results results --studies gpu feedmode-gpu" in plan, plan
    assert "--out docs/reference-report-gpu" in plan, plan


def test_make_gpu_runs_the_gpu_configs_then_the_report():
    plan = subprocess.run(["make", "-n", "gpu"], cwd=ROOT, capture_output=True, text=True,
                          check=True, env={**os.environ, "MAKEFLAGS": ""}).stdout
    steps = ["study run configs/gpu.toml", "study feedmode --config configs/feedmode-gpu.toml",
             "study bench --device gpu", "study figures regression --results results/gpu",
             "study figures feedmode --results results/feedmode-gpu", "study report"]
    assert [plan.index(step) for step in steps] == sorted(plan.index(s) for s in steps), plan


def test_make_gpu_without_a_gpu_stops_in_one_line_with_exit_2():
    """No GPU here: the GPU study's sweep refuses before any run (its CPU rows answer nothing
    alone), naming each framework that sees none; make stops there, no traceback."""
    from study.frameworks.registry import gpu_nodes_present

    if gpu_nodes_present():
        pytest.skip("this machine has a GPU")
    done = subprocess.run(["make", "gpu"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "MAKEFLAGS": ""}, timeout=600)
    assert done.returncode == 2, done.stdout + done.stderr
    assert ("configs/gpu.toml needs a GPU: no GPU visible to JAX; no GPU visible to PyTorch; "
            "nothing was run") in done.stderr
    assert "Traceback" not in done.stderr and "study feedmode" not in done.stdout


def test_the_stored_reference_report_links_only_files_that_git_tracks():
    """docs/reference-report/ must read on a fresh checkout: every image it links is in the
    repository (an ignore rule once kept its figures out while the report linked them)."""
    import re

    report = ROOT / "docs" / "reference-report" / "report.md"
    if not report.is_file():
        pytest.skip("no stored reference report")
    links = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", report.read_text())
    assert links, "the reference report links no figures"
    paths = sorted({str((report.parent / link).resolve().relative_to(ROOT)) for link in links})
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    ignored = subprocess.run(["git", "check-ignore", *paths], cwd=ROOT, capture_output=True,
                             text=True).stdout.split()
    assert not ignored, f"ignored by .gitignore: {ignored}"
    missing = [p for p in paths if not (ROOT / p).is_file()]
    assert not missing, f"linked but absent: {missing}"


FAKE_RUN = '''
import json, sys, time
from pathlib import Path
args = sys.argv[1:]
out = Path(args[args.index("--out") + 1])
with open("schedule.jsonl", "a") as log:
    log.write(json.dumps(["start", args[0], str(out), time.time()]) + "\\n")
time.sleep(1.0)
if args[0] in ("run", "feedmode"):
    (out / "runs.parquet").touch()
else:
    for path in out.iterdir():
        path.touch()
with open("schedule.jsonl", "a") as log:
    log.write(json.dumps(["end", args[0], str(out), time.time()]) + "\\n")
'''


def _schedule(folder) -> list[tuple[str, str, float, float]]:
    import json

    events = [json.loads(line) for line in (folder / "schedule.jsonl").read_text().splitlines()]
    starts = {(e[1], e[2]): e[3] for e in events if e[0] == "start"}
    return [(e[1], e[2], starts[(e[1], e[2])], e[3]) for e in events if e[0] == "end"]


@pytest.mark.slow
def test_sweeps_never_overlap_and_reproduce_draws_side_by_side(built):
    """Runs measured side by side would time each other: even under `make -j4` no two
    recipes run at once; a plain `make reproduce` draws the studies' figures side by side,
    after every sweep."""
    import sys

    folder, _ = built
    (folder / "fake_run.py").write_text(FAKE_RUN)
    run = f"RUN={sys.executable} fake_run.py"
    results = [f"results/{s}/runs.parquet" for s in ("regression", "feedmode", "logistic")]
    for make in (["make", "-j4", *results, run], ["make", "reproduce", run]):
        for config in ("regression", "feedmode", "logistic"):
            (folder / "configs" / f"{config}.toml").touch()
        (folder / "schedule.jsonl").unlink(missing_ok=True)
        subprocess.run(make, cwd=folder, check=True, capture_output=True)
        jobs = _schedule(folder)
        sweeps = [j for j in jobs if j[0] in ("run", "feedmode")]
        assert len(sweeps) == 3
        for sweep in sweeps:
            others = [j for j in jobs if j is not sweep]
            assert all(o[3] <= sweep[2] or o[2] >= sweep[3] for o in others), (sweep, others)
    figures = [j for j in jobs if j[0] == "figures"]
    assert len(figures) == 3 and [j[0] for j in jobs].count("report") == 1
    assert max(f[2] for f in figures) < min(f[3] for f in figures)  # drawn side by side
    assert min(f[2] for f in figures) >= max(s[3] for s in sweeps)


def test_the_drawing_step_never_starts_a_sweep(built):
    """A results table out of date in reproduce's drawing step (a source file changed during
    the sweeps) stops make with one line instead of sweeping beside the drawing."""
    folder, _ = built
    (folder / "fake_run.py").write_text(FAKE_RUN)
    (folder / "configs" / "regression.toml").touch()
    done = subprocess.run(["make", "-j3", "PARALLEL_DRAWING=1", "reports/report.md",
                           f"RUN={sys.executable} fake_run.py"], cwd=folder, capture_output=True,
                          text=True)
    assert done.returncode != 0
    assert "results/regression/runs.parquet is out of date again" in done.stderr
    log = folder / "schedule.jsonl"
    assert not log.exists() or '"run"' not in log.read_text()


def test_the_prerequisites_are_the_plugins_lists(built):
    """A sweep's prerequisites are its plugin's code_files over the config's runs (plus the
    engine's scheduling code); the figures', what the plugin's figures module imports."""
    from study.files import files
    from study.sweep.grid import load_study
    from study.sweep.plugin import load_kind

    study = load_study(ROOT / "configs" / "feedmode.toml")
    plugin = load_kind(study.kind)
    measured = {path for spec in study.specs for path in plugin.code_files(spec)}
    assert set(files(str(ROOT / "configs" / "feedmode.toml"))) == measured
    folder, _ = built
    one = sorted(measured - {"study/output.py"})[0]
    (folder / one).touch()
    plan = make_dry(folder)
    assert "study feedmode --config configs/feedmode.toml" in plan, one
    assert "study run configs/regression.toml" not in plan or one.startswith(("datasets",
                                                                             "optimizers"))
    drawn = files(str(ROOT / "configs" / "feedmode.toml"), drawn=True)
    assert "study/feedmode/figures.py" in drawn and "study/feedmode/measure.py" not in drawn
