"""``attnbounds prove [IDS...]`` / ``python -m attnbounds.proofs``: replay every derivation, one line per reading.

Per reading: the proof's name, its steps checked / size-limited / cited / prose-only, its premises, and the
result (PROVED, PROVED MODULO PROSE, FAILED); readings without a proof name their proved corrected form or say
UNDECIDED with what blocks it. Exit status: 0 when every replayed derivation replays, 1 when a
step fails, 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from attnbounds.theory.mathematics.errors import AttnBoundsError

if TYPE_CHECKING:
    from attnbounds.proofs.framework import Replay


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnbounds prove", description=__doc__.splitlines()[0])
    parser.add_argument("ids", nargs="*", help="statement ids (default: every registered reading)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every step and witness check")
    parser.add_argument("--replay", metavar="RECORDS",
                        help="re-check every PROVED record of a records file: its statement rebuilt from the record, "
                             "its relaxation certificate re-derived from that statement and every box re-checked in "
                             "rigorous interval arithmetic, its derivation or closed claim re-run; IDS restrict it to "
                             "those records")
    return parser


def replay_records(path: str, ids: list[str]) -> int:
    """``attnbounds prove --replay RECORDS [IDS]``: one line per PROVED record, its evidence re-derived from its own
    statement (:func:`attnbounds.theory.running.replay.replay_proved`); exit 0 when every one re-checks, 1 when one
    does not (a malformed record raises InvalidArgument: exit 2)."""
    from attnbounds.theory.io import records
    from attnbounds.theory.io.terminal import printable
    from attnbounds.theory.running.replay import replay_proved

    failed = checked = skipped = 0
    for rec in records.iter_records(path):
        if ids and rec.id not in ids:
            continue
        if rec.verdict != "PROVED":
            skipped += 1
            continue
        checked += 1
        out = replay_proved(rec)
        failed += not out.ok
        print(f"{printable(rec.id, lines=False):48s} {'REPLAYS' if out.ok else 'FAILED':8s} "
              f"{printable(out.what, lines=False)} ({out.seconds:.1f} s)")
    print(f"\n{checked} PROVED record(s) re-checked, {failed} failed; {skipped} other record(s) skipped (a REFUTED "
          f"one replays with attnbounds search ID --replay RECORDS)")
    return 1 if failed else 0


def _replay_line(statement_id: str, replay: Replay) -> str:
    counts = (f"{replay.checked:2d} checked {replay.size_limited:d} size-limited {replay.cited:2d} cited "
              f"{replay.prose:d} prose {len(replay.premises):d} premises")
    sharp = {True: "sharp", False: "WITNESS FAILED", None: "no witness"}[replay.sharp]
    return f"{statement_id:48s} {replay.result:20s} {counts}  {sharp:10s} {replay.name}"


def _steps(replay: Replay) -> list[str]:
    mark = {True: "ok  ", False: "FAIL", None: "... "}
    return [f"    [{mark[s.ok]}] {s.kind:10s} {s.text}" + ("" if s.ok else f"\n           -> {s.detail}")
            for s in (*replay.steps, *replay.witness)]


def run(ids: list[str], verbose: bool = False) -> int:
    from attnbounds import proofs
    from attnbounds.theory.mathematics import registry

    from tqdm import tqdm

    targets = ids or registry.ids()
    derivations = {id_: proofs.get(id_) for id_ in targets}
    open_ = proofs.not_proved()
    replays = {}
    start = time.perf_counter()
    for d in tqdm({d.name: d for d in derivations.values() if d}.values(), desc="replaying", unit="proof",
                  disable=None, file=sys.stderr, leave=False):
        replays[d.name] = d.replay()
    tally: dict[str, int] = {}
    for id_ in targets:
        d = derivations[id_]
        if d is not None:
            rep = replays[d.name].restrict(id_)
            print(_replay_line(id_, rep))
            if verbose or not rep.ok:
                print("\n".join(_steps(rep)))
                print(f"    rests on: {rep.rests_on()}")
                if d.notes:
                    print(f"    note: {d.notes}")
            key = rep.result
        elif id_ in open_:
            why, corrected = open_[id_]
            key = "NOT PROVED" if corrected else "UNDECIDED"
            print(f"{id_:48s} {key:20s} {'corrected form: ' + corrected if corrected else ''}")
            if verbose or not corrected:
                print(f"    {why}")
        else:
            key = "NO DERIVATION"
            print(f"{id_:48s} {key:20s} (no derivation and no note: add one to proofs/)")
        tally[key] = tally.get(key, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(tally.items()))
    print(f"\n{len(targets)} readings: {summary}; {len(replays)} derivations replayed in "
          f"{time.perf_counter() - start:.1f} s")
    return 0 if all(r.ok for r in replays.values()) else 1


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.replay:
            return replay_records(args.replay, args.ids)
        return run(args.ids, args.verbose)
    except AttnBoundsError as exc:
        print(f"attnbounds prove: error: {exc}", file=sys.stderr)
        return 2
