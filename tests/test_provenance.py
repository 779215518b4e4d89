"""The commit a row records is the project's own, or "unknown": a project tree without its own
.git (unpacked from an archive) inside another git repository must not record that one's."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from study.sweep import environment

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(folder: Path, *arguments: str) -> str:
    return subprocess.run(["git", "-C", str(folder), "-c", "user.name=t", "-c",
                           "user.email=t@example.org", *arguments], capture_output=True,
                          text=True, check=True).stdout.strip()


def repository(folder: Path) -> str:
    """A git repository at `folder` with one commit; its commit."""
    folder.mkdir(parents=True, exist_ok=True)
    git(folder, "init", "-q")
    (folder / "README").write_text("outer\n")
    git(folder, "add", "README")
    git(folder, "commit", "-q", "-m", "one")
    return git(folder, "rev-parse", "HEAD")


def stand_in(root: Path) -> Path:
    """A copy of the module where a project tree would hold it (no .git of its own)."""
    module = root / "study" / "sweep" / "environment.py"
    module.parent.mkdir(parents=True)
    shutil.copy(environment.__file__, module)
    return root


def test_a_tree_without_its_own_git_inside_another_repository_is_unknown(tmp_path, monkeypatch):
    outer = tmp_path / "outer"
    outer_commit = repository(outer)
    monkeypatch.setattr(environment, "ROOT", stand_in(outer / "unpacked" / "project"))
    assert environment._git_commit() == "unknown" != outer_commit


def test_a_tree_outside_any_repository_is_unknown(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.setattr(environment, "ROOT", stand_in(tmp_path / "project"))
    assert environment._git_commit() == "unknown"


def test_a_project_that_is_its_own_repository_records_its_commit(tmp_path, monkeypatch):
    root = stand_in(tmp_path / "project")
    commit = repository(root)
    monkeypatch.setattr(environment, "ROOT", root)
    assert environment._git_commit() == commit
    (root / "README").write_text("changed\n")
    assert environment._git_commit() == f"{commit}+dirty"
    assert re.fullmatch(r"[0-9a-f]{40}", commit)


def test_the_root_is_the_folder_that_holds_the_project():
    assert (environment.ROOT / "study" / "sweep" / "environment.py").is_file()
    assert (environment.ROOT / "optimizers").is_dir()
