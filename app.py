"""Transfer Lab: the landing page. Streamlit only: it reads labcore's registries and never imports torch."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from labcore import assets
from labcore import data as disciplines

st.set_page_config(page_title="Transfer Lab", layout="wide")
st.title("Transfer Lab")
st.markdown(
    "What does a transformer pretrained on text carry over to data that is not text? "
    "Pick a pretrained model, a discipline (DNA, proteins, music, bit strings, ListOps, image patches, "
    "scrambled text) and a protocol, train it in the background, and compare it with the same model "
    "trained from scratch."
)

st.subheader("Assets")
rows = [{"asset": name, "kind": a.kind, "present": "yes" if assets.is_available(name) else "no",
         "source": f"{a.source}: {a.requirement}", "size (MB)": round(a.size / 2**20, 1), "licence": a.licence}
        for name, a in assets.ASSETS.items()]
st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
missing = [r["asset"] for r in rows if r["present"] == "no"]
if missing:
    st.warning("Missing assets: " + ", ".join(missing) + ". Fetch them with "
               "`python -m labcore assets fetch --default` (make run does it).")

st.subheader("Disciplines")
table = []
for name in disciplines.names():
    discipline = disciplines.get(name)
    ok, why = discipline.available()
    info = discipline.info(disciplines.parse_params(discipline, {}))
    table.append({"discipline": name, "title": info.title, "input": info.input_kind,
                  "output": info.output_kind, "metric": info.metric,
                  "available": "yes" if ok else why, "paper": info.citation})
st.dataframe(pd.DataFrame(table), hide_index=True, width="stretch")
