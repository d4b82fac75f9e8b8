"""The ``music-composer`` discipline: its parameters, the choice of pieces, and the dataset of windows
(see :mod:`labcore.data.music` for the rules)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from labcore import assets
from labcore.data import register
from labcore.data.base import Discipline, DisciplineInfo, ProgressFn
from labcore.data.music.corpus import candidate_order, composer_pieces, corpus_composers, split_pieces
from labcore.data.music.midi import note_names, spaced, windows
from labcore.data.music.parsing import WORKERS, PieceParser, PitchCache, pitch_cache_path
from labcore.errors import LabError

ASSET = "music21-corpus"
COMPOSERS = ("bach", "palestrina", "monteverdi", "beethoven")


@dataclass(frozen=True)
class MusicParams:
    composers: tuple[str, ...] = COMPOSERS  # class order = label order; names as music21's corpus folders
    # Pieces per composer, a seeded sample; 0 means every piece. 100 keeps the classes within 5x of each
    # other in pieces (Bach has 410, Palestrina 1,318, Monteverdi 49, Beethoven 22) and the first build
    # near 2.5 CPU-minutes, most of them spent on Beethoven's long quartet scores.
    cap_per_composer: int = 100
    window: int = 128  # pitches per example, as the paper
    # Windows kept per piece, evenly spaced through it; 0 keeps all (the paper). Without a cap, the 22
    # long Beethoven quartets give 57 % of all windows; 8 balances the classes by windows too.
    max_windows_per_piece: int = 8
    seed: int = 0  # seeds both the sample of pieces and the split

    def __post_init__(self) -> None:
        # Lists arrive from JSON and forms; keep a tuple so the frozen Params stays hashable.
        composers = tuple(str(c).strip().lower() for c in self.composers)
        object.__setattr__(self, "composers", composers)
        if len(composers) < 2:
            raise LabError(f"music-composer needs at least two composers to classify, got {list(composers)}; "
                           f"name two or more, e.g. {', '.join(COMPOSERS)}")
        if len(set(composers)) != len(composers):
            raise LabError(f"music-composer: composers {list(composers)} name one composer twice; "
                           f"list each composer once")
        if self.cap_per_composer < 0:
            raise LabError(f"music-composer: cap_per_composer must be >= 0 (0 = every piece), "
                           f"got {self.cap_per_composer}")
        if self.window < 1:
            raise LabError(f"music-composer: window must be at least 1 pitch, got {self.window}; "
                           f"the paper uses 128")
        if self.max_windows_per_piece < 0:
            raise LabError(f"music-composer: max_windows_per_piece must be >= 0 (0 = every window), "
                           f"got {self.max_windows_per_piece}")


def select_and_parse(params: MusicParams,
                     progress: ProgressFn) -> tuple[dict[str, list[str]], PitchCache, dict[str, str]]:
    """Each composer's chosen pieces (sorted), the pitch cache holding them, and the skipped pieces."""
    available = {}
    for composer in params.composers:
        pieces = composer_pieces(composer)
        if not pieces:
            raise LabError(f"music21's corpus has no scores by {composer!r}; composers with scores: "
                           f"{', '.join(corpus_composers())}")
        available[composer] = pieces
    orders = {c: candidate_order(p, c, params.seed) for c, p in available.items()}
    cache = PitchCache(pitch_cache_path())
    with PieceParser(cache, progress) as parser:
        while True:
            # Walk each composer's seeded order until the cap is met; pieces known to fail are passed
            # over, so the next one takes their place. Repeat while this finds pieces not parsed yet.
            chosen: dict[str, list[str]] = {}
            skipped: dict[str, str] = {}
            todo: list[str] = []
            for composer, order in orders.items():
                cap = params.cap_per_composer or len(order)
                picked: list[str] = []
                for rel in order:
                    if len(picked) >= cap:
                        break
                    reason = cache.failed.get(rel) or parser.lost.get(rel)
                    if reason:
                        skipped[rel] = reason
                        continue
                    picked.append(rel)
                    if rel not in cache.pitches:
                        todo.append(rel)
                chosen[composer] = picked
            if not todo:
                break
            cached = sum(len(p) for p in chosen.values()) - len(todo)
            progress(f"music21 corpus: parsing {len(todo)} pieces on up to {WORKERS} processes "
                     f"({cached} already cached)")
            parser.parse(todo)
    return {c: sorted(p) for c, p in chosen.items()}, cache, skipped


# --------------------------------------------------------------------------------------------------
# the discipline


@register
class MusicComposer(Discipline):
    name = "music-composer"
    title = "Music composer classification (music21 corpus)"
    Params = MusicParams
    presets = {
        "quick": {"cap_per_composer": 10},  # a demo-sized build: 10 pieces each (8/1/1 split)
        "full": {"cap_per_composer": 0, "max_windows_per_piece": 0},  # every piece and window (the paper)
    }

    def info(self, params: MusicParams) -> DisciplineInfo:
        asset = assets.ASSETS[ASSET]
        cap = f"at most {params.cap_per_composer}" if params.cap_per_composer else "all"
        return DisciplineInfo(
            name=self.name, title=self.title, input_kind="tokens", output_kind="class", metric="accuracy",
            alphabet=note_names(), class_names=tuple(c.capitalize() for c in params.composers),
            max_length=params.window, vote_by_group=True, assets=(ASSET,),
            citation="Kao & Lee 2021, §3.1 and appendix G.4 (music composer classification, MAESTRO)",
            source=f"music21 {asset.version} bundled corpus via pretty_midi",
            licence=asset.licence,
            notes=(f"Stands in for MAESTRO-v1, which needs a data hub. {cap.capitalize()} pieces per "
                   f"composer (cap_per_composer={params.cap_per_composer}), a seeded sample "
                   f"(seed={params.seed}) of each composer's corpus scores without .rntxt analyses and "
                   f"with one copy per movement (MusicXML preferred); a piece that fails to parse is "
                   f"skipped and replaced by the next in the seeded order, and each split's description "
                   f"lists the skipped ones. Score as written (repeats not played out, ties merged, "
                   f"grace notes left out) -> MIDI (music21) -> pretty_midi: every note of every "
                   f"non-drum instrument, by onset, simultaneous notes lowest pitch first; token = MIDI "
                   f"pitch, named as pretty_midi names it. Windows of {params.window} pitches, stride "
                   f"{params.window}; the last partial window is dropped unless the piece "
                   f"is shorter than one window (then kept, shorter). Split by piece (group = corpus "
                   f"path), 80/10/10 of each composer's pieces, at least one per split where a composer "
                   f"has three or more; evaluation votes over a piece's windows. Long pieces give many "
                   f"windows: at most {params.max_windows_per_piece or 'all'} evenly spaced windows are kept per piece."),
        )

    def build(self, params: MusicParams, progress: ProgressFn):
        import datasets

        assets.require(ASSET)
        chosen, cache, skipped = select_and_parse(params, progress)
        features = datasets.Features({"tokens": datasets.List(datasets.Value("int64")),
                                      "label": datasets.Value("int64"), "group": datasets.Value("string")})
        rows: dict[str, dict[str, list]] = {s: {"tokens": [], "label": [], "group": []}
                                            for s in ("train", "validation", "test")}
        counts = []
        for label, composer in enumerate(params.composers):
            parts = split_pieces(chosen[composer], composer, params.seed)
            for split, pieces in zip(rows, parts):
                for rel in pieces:
                    for chunk in spaced(windows(cache.pitches[rel], params.window),
                                        params.max_windows_per_piece):
                        rows[split]["tokens"].append(chunk)
                        rows[split]["label"].append(label)
                        rows[split]["group"].append(rel)
            counts.append(f"{composer}: " + "/".join(str(len(p)) for p in parts))
        if skipped:
            missed = "; ".join(f"{rel} ({why})" for rel, why in sorted(skipped.items()))
            skip_note = f"Skipped, could not be parsed: {missed}."
        else:
            skip_note = "No piece was skipped."
        report = "pieces train/validation/test: " + "; ".join(counts) + ". " + skip_note
        progress(report)
        # Kept with the Arrow files, so a cached load still tells which pieces were left out.
        info = datasets.DatasetInfo(description=f"music-composer from music21's corpus. {report}",
                                    features=features)
        return datasets.DatasetDict({split: datasets.Dataset.from_dict(columns, features=features, info=info)
                                     for split, columns in rows.items()})


def piece_counts(dataset: Any, info: DisciplineInfo) -> dict[str, dict[str, int]]:
    """Split -> class name -> number of pieces (groups), for reports and the Data page."""
    out: dict[str, dict[str, int]] = {}
    for split in dataset:
        seen: dict[str, set[str]] = {name: set() for name in info.class_names}
        for label, group in zip(dataset[split]["label"], dataset[split]["group"]):
            seen[info.class_names[label]].add(group)
        out[split] = {name: len(groups) for name, groups in seen.items()}
    return out
