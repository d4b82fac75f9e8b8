"""The pages' one door into the library: everything ``pages/`` and ``app.py`` read of labcore comes through
the modules of this package, so the engine can be reorganised behind it without touching a page.

A page holds a :class:`~labcore.door.lab.Lab` (which store, as data) and a :class:`~labcore.door.desk.Desk`
(the executor as one requester uses it: submitting, cancelling, holding workers, deleting); every reading is a
function of the lab that returns rows, never the ``Store`` (tests/test_door.py checks every public name).

Each module gathers one subject (:mod:`.lab`, :mod:`.desk`, :mod:`.runs`, :mod:`.catalogue`, :mod:`.data`,
:mod:`.uploads`, :mod:`.jobs`, :mod:`.recipes`, :mod:`.lessons`, :mod:`.views`) and names what it hands out in
``__all__``: functions, constants and classes of rows, never a module of the library (a page that held one could
reach past the door through it). A page imports only the modules it draws from, so none pays for what it does not
show.
Nothing here imports torch or streamlit: the app's server never loads torch (tests/test_pages.py checks).
The ``pages-through-the-door`` contract of ``.importlinter`` keeps the pages off everything else.
"""
