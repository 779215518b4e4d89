"""Plugins a sweep registers on a Dask cluster to put the toolkit's packages first on the path
of the scheduler and of every worker (later ones too), so that a plain `dask scheduler` and
`dask worker ADDRESS` where the toolkit is installed serve it."""

from __future__ import annotations

from distributed.diagnostics.plugin import SchedulerPlugin, WorkerPlugin

import convergence_study

NAME = "convergence-study-path"


class SchedulerPath(SchedulerPlugin):
    name = NAME
    idempotent = True

    def start(self, scheduler) -> None:
        convergence_study.activate()


class WorkerPath(WorkerPlugin):
    name = NAME
    idempotent = True

    def setup(self, worker) -> None:
        convergence_study.activate()
