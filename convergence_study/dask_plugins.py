"""A Dask cluster's scheduler and workers import the toolkit's own packages (the runner sends
them functions of `study.sweep.dask`): a sweep registers these plugins, which put the packages
first on the path of the scheduler and of every worker (those that join later too), so a plain
`dask scheduler` and `dask worker ADDRESS ...` in an environment where the toolkit is installed
serve it."""

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
