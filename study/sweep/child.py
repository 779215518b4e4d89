"""What a run's own process does: measure the spec, add the engine's columns, write the row
(side tables first, the row last) into the pending folder the runner made for it. A measurement
that raises becomes an `error` row (its traceback is in the run's log).
"""

from __future__ import annotations

import io
import json
import os
import socket
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from convergence_study.errors import failure_line
from study.output import write_parquet_atomic, write_text_atomic
from study.sweep import environment
from study.sweep.noise import NoiseProbe
from study.sweep.plugin import RunContext, load_plugin


def reset_peak_memory() -> int:
    """Reset this process's peak resident size (VmHWM) and return what it inherited."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    return _status_kb("VmRSS") * 1024


def peak_memory_bytes() -> int:
    return _status_kb("VmHWM") * 1024


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def base_row(request: dict, spec) -> dict:
    return {"run_id": spec.run_id, "study": request["study"], "kind": request["kind"],
            "spec": spec.to_json(), "repeat": spec.repeat, **spec.axes(),
            "code_fingerprint": request["code_fingerprint"],
            "sweep_id": request.get("sweep_id"), "order_seed": request.get("order_seed"),
            "order_position": request.get("order_position"),
            "worker_host": socket.gethostname(), "worker_address": None}


def warm() -> None:
    """What a run's first table imports on its way to a file (pandas' Arrow-backed text and its
    conversion to Arrow), imported once in the warm process instead of in every run's."""
    pd.DataFrame({"text": ["a"], "number": [1.0]}).to_parquet(io.BytesIO())


def execute(request: dict) -> None:
    t0 = time.perf_counter()
    inherited = reset_peak_memory()
    plugin = load_plugin(request["plugin"])
    spec = plugin.spec_from_json(request["spec"])
    pending = Path(request["pending"])
    row = {**base_row(request, spec), "pid": os.getpid(),
           "started_at": datetime.now(UTC).isoformat(timespec="seconds")}
    probe = NoiseProbe()
    ctx = RunContext(cache_dir=Path(request["cache"]), probe=probe,
                  save_partial=lambda record: write_text_atomic(
                      json.dumps(record, default=str), pending / "partial.json"))
    tables = {}
    try:
        measurement = plugin.measure(spec, ctx)
        row.update(measurement.row)
        tables = measurement.tables
    except Exception as exc:  # recorded as the run's status; the traceback goes to the log
        traceback.print_exc()
        row.update(status="error", message=failure_line(exc))
    env = environment.collect()
    row.update(probe.columns(), **env, env_fingerprint=environment.fingerprint(env),
               inherited_memory_mb=inherited / 2**20,
               peak_memory_mb=(peak_memory_bytes() - inherited) / 2**20,
               wall_seconds=time.perf_counter() - t0)
    try:
        table = plugin.SCHEMA.table([row])
    except ValueError as exc:  # an undeclared column: a bug, recorded rather than lost
        traceback.print_exc()
        keep = {k: v for k, v in row.items() if plugin.SCHEMA.kind_of(k) is not None}
        table = plugin.SCHEMA.table([{**keep, "status": "error", "message": failure_line(exc)}])
        tables = {}
    for name, side in tables.items():
        if side is not None and len(side):
            write_parquet_atomic(plugin.SIDE_TABLES[name].table(side.assign(run_id=spec.run_id)),
                                 pending / f"{name}.parquet")
    write_parquet_atomic(table, pending / "row.parquet")
