"""The plugin base: a study's plugin is one instance of a study.sweep.plugin.StudyPlugin
subclass, which states its required members and overrides only the hooks whose declared default
does not fit; one lacking a required member, or a module with no PLUGIN, is named."""

from __future__ import annotations

import sys
import textwrap

import pytest

from study.sweep import plugin as registry
from study.sweep.plugin import REQUIRED, StudyPlugin, load_kind, load_plugin

TOY = {
    "__init__.py": "",
    "plugin.py": """
        from dataclasses import dataclass

        from study.sweep.plugin import StudyPlugin

        @dataclass(frozen=True)
        class Spec:
            device: str = "cpu"

        class Toy(StudyPlugin):
            KIND = "toy"
            CONFIG_KEYS = ()
            SCHEMA = None
            MEASURE_STATUSES = ("ok",)
            Spec = Spec

            def expand(self, raw, source, name, repeats):
                return [Spec()]

            def spec_from_json(self, text):
                return Spec()

            def framework(self, spec):
                return None

            def code_files(self, spec):
                return []

            def summary(self, runs):
                return ""

        PLUGIN = Toy()
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
    assert toy.conclusions(None, "toy") == [] and toy.refined(None, "toy") == []  # no answers
    assert toy.pairs(None) is None and toy.subjects(None) == [] and toy.title(None) == "toy"
    assert load_kind("toy") is toy  # one instance, on the module the run's process imports too


def test_a_plugin_stating_a_member_keeps_its_own():
    regression = load_kind("regression")
    assert regression.FAILED_STATUSES == ("error", "failed", "reference-error")
    assert regression.needs_gpu.__module__ == "study.regression.plugin"
    assert regression.FIRST_REACHED and not load_kind("feedmode").FIRST_REACHED
    assert "uncertifiable" in regression.MEASURE_STATUSES
    feedmode = load_kind("feedmode")
    assert feedmode.preload("jax") == ("study.frameworks.jax.feedmode",)
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
    assert type(train).measure is StudyPlugin.measure  # the default
    assert train.preload("jax") == ("study.frameworks.jax.train:warm",)


def test_a_module_without_a_plugin_or_lacking_a_member_is_named(monkeypatch, tmp_path):
    monkeypatch.setitem(registry.STUDIES, "broken", "json")
    with pytest.raises(TypeError, match="study plugin json defines no PLUGIN"):
        registry.load_kind("broken")
    (tmp_path / "halfstudy.py").write_text(textwrap.dedent("""
        from study.sweep.plugin import StudyPlugin

        class Half(StudyPlugin):
            KIND = "half"

            def summary(self, runs):
                return ""

        PLUGIN = Half()
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(TypeError, match="study plugin halfstudy lacks CONFIG_KEYS, SCHEMA, "
                                        "MEASURE_STATUSES, expand, spec_from_json, framework, "
                                        "code_files$"):
        load_plugin("halfstudy")
    assert "summary" in REQUIRED
    sys.modules.pop("halfstudy", None)


def test_studies_are_found_by_their_folders_and_the_environment(monkeypatch):
    """Every package under study/ with a plugin.py is a study of its folder's name; a user's own
    study packages are named in CONVERGENCE_STUDY_STUDIES; a plugin must say the same KIND."""
    assert {"regression", "feedmode", "train"} <= set(registry._scan())
    assert "sweep" not in registry._scan() and "bench" not in registry._scan()
    assert registry._registered(f"mine.toy{registry.os.pathsep}other") == {
        "toy": "mine.toy.plugin", "other": "other.plugin"}
    monkeypatch.setitem(registry.STUDIES, "misnamed", "study.feedmode.plugin")
    with pytest.raises(TypeError, match="says KIND = 'feedmode', not 'misnamed'"):
        load_kind("misnamed")
