"""One view of an L1 corpus, shown on the Pretrain page (before pretraining on it) and on Data (beside the
disciplines): what it is, its licence, its size, a seeded sample with its unigram histogram and, for the
bracket grammars, the nesting depths."""

from __future__ import annotations

import streamlit as st

from labcore.door.data import (CORPUS_MAX_LENGTH, CORPUS_MIN_LENGTH, corpus_about, corpus_sample, corpus_text_size,
                               corpus_vocabulary)
from labcore.door import views
from labcore.errors import LabError

SAMPLE_SEQUENCES = 200


@st.cache_data(show_spinner="Drawing a sample of the corpus…", max_entries=16)
def sample(name: str, seed: int) -> tuple[dict, list[list[str]]]:
    return corpus_sample(name, SAMPLE_SEQUENCES, seed, shown=3, tokens=40)


@st.cache_data(show_spinner="Reading the text…", max_entries=16)
def size_text(name: str) -> str:
    size = corpus_text_size(name)
    if size is None:
        return (f"generated on demand, seeded: a pretraining draws as many sequences of {CORPUS_MIN_LENGTH}-"
                f"{CORPUS_MAX_LENGTH} tokens as it asks for")
    train, held_out = size
    return f"{train + held_out:,} tokens: {train:,} for training, {held_out:,} held out"


def show(name: str, seed: int, *, key: str, expanded: bool = False) -> bool:
    """The corpus's description, size and sample; False (with the reason shown) where it cannot be read."""
    corpus = corpus_about(name)
    try:
        stats, examples = sample(name, seed)
        size = size_text(name)
    except LabError as exc:
        st.warning(f"{exc}. The corpora draw ids of MiniLM's vocabulary, and the real texts come from assets too: "
                   f"fetch the assets on **Home** first.")
        return False
    st.caption(f"{corpus.description}. Size: {size}. Licence: {corpus.licence}.")
    with st.expander(f"Sample of {name}: {stats['tokens']:,} tokens in {stats['sequences']} sequences, "
                     f"{stats['distinct']:,} distinct ids", expanded=expanded):
        for tokens in examples:
            st.code(" ".join(tokens) + " …", language="text")
        st.plotly_chart(views.corpus_figure(stats, corpus_vocabulary()), key=f"{key}.chart",
                        config={"displaylogo": False})
    return True
