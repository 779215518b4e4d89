"""The plugin base: a study module states only what differs from study.sweep.plugin.DEFAULTS;
one that states everything itself loads as before."""

from __future__ import annotations

import sys
import textwrap

import pytest

from study.sweep import plugin as registry
from study.sweep.plugin import DEFAULTS, StudyPlugin, load_kind, load_plugin

TOY = {
    "__init__.py": "",
    "plugin.py": """
        from dataclasses import dataclass

        KIND = "toy"
        CONFIG_KEYS = ()
        SCHEMA = None
        MEASURE_STATUSES = ("ok",)

        @dataclass(frozen=True)
        class Spec:
            device: str = "cpu"

        def expand(raw, source, name, repeats):
            return [Spec()]

        spec_from_json = Spec

        def framework(spec):
            return None

        def code_files(spec):
            return []

        def summary(runs):
            return ""
        """,
    "measure.py": """
        def measure(spec, ctx):
            return ("measured", spec, ctx)
        """,
}


@pytest.fixture
def toy(tmp_path, monkeypatch):
    package = tmp_path / "toystudy"
    package.mkdir()
    for name, text in TOY.items():
        (package / name).write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry.STUDIES, "toy", "toystudy.plugin")
    yield load_kind("toy")
    for name in ("toystudy", "toystudy.plugin", "toystudy.measure"):
        sys.modules.pop(name, None)


def test_a_plugin_stating_only_what_differs_gets_the_defaults(toy):
    assert isinstance(toy, StudyPlugin)
    assert (toy.MEASURE_MODULE, toy.FIGURES_MODULE, toy.REPORT_MODULE) == (
        "toystudy.measure", "toystudy.figures", "toystudy.report")
    spec = toy.Spec()
    assert toy.measure(spec, "ctx") == ("measured", spec, "ctx")  # its measuring module's
    assert toy.prerequisites(spec) == [] and toy.resolve(spec, {}) is spec
    assert toy.check_grid([spec]) is None and toy.preload("jax") == ()
    assert not toy.needs_gpu(spec) and toy.needs_gpu(toy.Spec(device="gpu"))
    assert toy.FAILED_STATUSES == ("error",) and toy.SIDE_TABLES == {}
    assert load_kind("toy") is toy  # filled once, on the module the run's process imports too


def test_a_plugin_stating_a_member_keeps_its_own():
    regression = load_kind("regression")
    assert regression.FAILED_STATUSES == ("error", "failed", "reference-error")
    assert regression.needs_gpu.__module__ == "study.regression.plugin"
    assert "uncertifiable" in regression.MEASURE_STATUSES
    feedmode = load_kind("feedmode")
    assert feedmode.preload("jax") == ("study.feedmode.measure_jax",)
    assert feedmode.MEASURE_STATUSES == ("ok", "mismatch")


def test_the_train_plugin_states_only_what_differs():
    """The train study names its measuring, figures and report modules (in its run/ and sweep/
    folders, not beside the plugin) and keeps its own members (its framework per run, its
    warm-up: the framework's adapter's `warm`, called in the warm process)."""
    train = load_kind("train")
    assert isinstance(train, StudyPlugin) and train.KIND == "train"
    assert train.MEASURE_STATUSES == ("reached", "timeout", "diverged", "completed")
    assert (train.MEASURE_MODULE, train.FIGURES_MODULE, train.REPORT_MODULE) == (
        "study.train.run.measure", "study.train.sweep.figures", "study.train.sweep.report")
    assert train.measure.__module__ == "study.sweep.plugin"  # the default
    assert train.preload("jax") == ("study.train.adapters.jax:warm",)


def test_every_default_is_a_member_and_a_module_lacking_one_without_is_left_alone(monkeypatch):
    assert set(DEFAULTS) <= set(registry._members())
    monkeypatch.setitem(registry.STUDIES, "broken", "json")
    with pytest.raises(TypeError, match="study plugin json lacks KIND, CONFIG_KEYS, SCHEMA, "
                                        "MEASURE_STATUSES"):
        registry.load_kind("broken")
    import json

    assert not hasattr(json, "MEASURE_MODULE")  # nothing set on a module that is no plugin
    with pytest.raises(TypeError, match="lacks"):
        load_plugin("json")
