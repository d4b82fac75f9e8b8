"""Grow your own pretrained models (Chiang & Lee): MLM pretraining on a chosen first language (L1).

* :mod:`.corpora`: the L1 corpora registry (uniform, zipf, nested and flat parentheses, small
  vocabularies), seeded generators over MiniLM's WordPiece ids.
* :mod:`.mlm`: a RoBERTa-shaped model from a size preset, 80/10/10 masking and an MLM head that decodes
  the masked positions only.
* :mod:`.engine`: the pretraining job itself, on the lab's training loop; the result is a ``lab:<name>``
  backbone folder.
* :mod:`.export`: a model written as a backbone folder (``lab:<name>``); :mod:`.bodies`: a finished
  run's body written out as one (``run:<key>``).

Only :mod:`.corpora` and :mod:`.spec` are torch-free; the pages and the job kind import those alone.
"""
