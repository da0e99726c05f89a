"""What reading records costs: ``python bench/report.py RECORDS [--copies N]``.

Both figures are ratios measured in this run, on the same records file (``RECORDS``, e.g. written by
``attnbounds verify --json``):

- ``report``: seconds per record of ``attnbounds report`` now, against the report of the commit before it was
  reworked (``theory/io/report.py`` of 5dff24f, read from git, run on the same records in the same process; skipped
  outside a git checkout);
- ``table``: the peak memory (VmHWM, Linux; in a fresh process each) of ``attnbounds table`` on a file of ``--copies``
  copies of the records (about 60 MB for 50 copies of a full run's 1.3 MB), against reading the same file whole
  (``json.loads``, then every record checked) as ``table`` did before it read one record at a time.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "5dff24f"


def _old_report(folder: Path) -> object | None:
    """The report module of :data:`BEFORE`, imported from git (None outside a checkout)."""
    try:
        text = subprocess.run(["git", "show", f"{BEFORE}:theory/io/report.py"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    path = folder / "old_report.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("old_report", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _seconds(write: object, records: Path, out: Path) -> float:
    start = time.perf_counter()
    write(records, out)  # type: ignore[operator]
    return time.perf_counter() - start


def _peak_mib(code: str) -> float:
    """Peak resident memory (MiB) of a fresh Python running ``code``: VmHWM, which starts anew at exec (the
    ru_maxrss of a child can carry its parent's from before the exec)."""
    child = subprocess.run([sys.executable, "-c", code + "\nimport sys\n"
                            "print([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1], "
                            "file=sys.stderr)"], capture_output=True, text=True, check=True)
    return int(child.stderr.strip().splitlines()[-1]) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", type=Path)
    ap.add_argument("--copies", type=int, default=50, help="copies of the records in the big file for table")
    args = ap.parse_args()
    from attnbounds.theory.io import records, report

    n = len(json.loads(args.records.read_text()))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        old = _old_report(folder)
        new_s = _seconds(lambda r, o: report.write_report(records.iter_records(r), o, name=Path(r).name), args.records, folder / "new")
        if old is not None:
            old_s = _seconds(old.write_report, args.records, folder / "old")  # type: ignore[attr-defined]
            print(f"report: {n} records, {new_s / n:.3f} s per record now, {old_s / n:.3f} s at {BEFORE}: "
                  f"{old_s / new_s:.2f}x faster")
        else:
            print(f"report: {n} records, {new_s / n:.3f} s per record (no git history: no baseline)")
        big = folder / "big.json"
        records = json.loads(args.records.read_text())
        big.write_text(json.dumps(records * args.copies))
        size = os.path.getsize(big) / 2**20
        streamed = _peak_mib(f"from attnbounds.theory.io import records as rec\n"
                             f"text = rec.verdict_table(rec.iter_records({str(big)!r}))")
        whole = _peak_mib(f"import json\nfrom attnbounds.theory.io import records as rec\n"
                          f"data = json.loads(open({str(big)!r}).read())\n"
                          f"text = rec.verdict_table([rec.Record.from_json(d) for d in data])")
        print(f"table: a {size:.0f} MB file of {n * args.copies} records, peak {streamed:.0f} MiB reading one record "
              f"at a time, {whole:.0f} MiB reading it whole: {whole / streamed:.1f}x less")


if __name__ == "__main__":
    main()
