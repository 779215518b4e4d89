"""The tidy results layout of a study folder, and assembling its tables from per-run files.

results/<study>/runs/<run_id>.parquet        one finished run's row (its presence = finished)
results/<study>/runs/<run_id>.trace.parquet  its convergence trace
results/<study>/logs/<run_id>.log            the run's stderr (tracebacks, TensorFlow logs)
results/<study>/runs.parquet, traces.parquet assembled from the above, written atomically
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from study.output import write_parquet_atomic

# Columns that differ between two executions of the same run: clocks and the process's memory.
TIMING_COLUMNS = ("seconds", "setup_seconds", "total_seconds", "seconds_per_iteration",
                  "read_pass_seconds", "peak_memory_mb")


class ResultsFolder:
    def __init__(self, root):
        self.root = Path(root)
        self.runs_dir = self.root / "runs"
        self.logs_dir = self.root / "logs"

    def prepare(self) -> None:
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        for stale in self.runs_dir.glob(".*.tmp-*"):  # left by a run killed mid-write
            stale.unlink(missing_ok=True)

    def record_path(self, run_id: str) -> Path:
        return self.runs_dir / f"{run_id}.parquet"

    def trace_path(self, run_id: str) -> Path:
        return self.runs_dir / f"{run_id}.trace.parquet"

    def log_path(self, run_id: str) -> Path:
        return self.logs_dir / f"{run_id}.log"

    def finished(self) -> dict[str, str]:
        """run_id -> status of every run made durable so far."""
        out = {}
        for path in self.runs_dir.glob("*.parquet"):
            if path.name.endswith(".trace.parquet") or path.name.startswith("."):
                continue
            try:
                out[path.stem] = pd.read_parquet(path, columns=["status"])["status"].iloc[0]
            except Exception:  # unreadable (damaged outside our atomic writes): run it again
                continue
        return out

    def write_run(self, row: dict, trace: pd.DataFrame | None) -> None:
        """Trace first, then the row: a row on disk always has its trace beside it."""
        run_id = row["run_id"]
        if trace is not None and len(trace):
            write_parquet_atomic(trace.assign(run_id=run_id), self.trace_path(run_id))
        write_parquet_atomic(pd.DataFrame([row]), self.record_path(run_id))

    def assemble(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Concatenate the per-run files into runs.parquet and traces.parquet."""
        rows = [pd.read_parquet(p) for p in sorted(self.runs_dir.glob("*.parquet"))
                if not p.name.endswith(".trace.parquet")]
        traces = [pd.read_parquet(p) for p in sorted(self.runs_dir.glob("*.trace.parquet"))]
        runs = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
        trace = pd.concat(traces, ignore_index=True) if traces else pd.DataFrame(
            columns=["run_id", "iteration", "seconds", "loss", "suboptimality", "grad_norm"])
        write_parquet_atomic(runs, self.root / "runs.parquet")
        write_parquet_atomic(trace, self.root / "traces.parquet")
        return runs, trace
