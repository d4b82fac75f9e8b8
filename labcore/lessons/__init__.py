"""Lessons: a class predicts, the lab runs, the result is revealed against the predictions, and everyone leaves
with a handout (predict, observe, explain).

A lesson is one TOML file of ``library/`` (:mod:`.load` checks it: :mod:`.model` is what it becomes): its
question and the kind of guess, the few runs that answer it, the measured figure that does (:mod:`.measure`),
an explanation written from those numbers (:mod:`.explain`), the paper it comes from and an optional what-if
step. :mod:`.runs` puts its runs through the ordinary job store; :mod:`.sittings` keeps a class's sittings and
predictions in the store's folder; :mod:`.handout` writes what a class takes home. No screen here: the Lessons
page reads all of it through :mod:`labcore.door.lessons`.
"""
