"""Analyses of trained runs, computed by the worker and stored beside the run, read back by the pages.

* :mod:`.attention`: attention maps of one example under the pretrained, random and fine-tuned weights
  (FPT §3.5, Kao & Lee's attention similarity), plus pure head-matching helpers.

Importing this package (and reading stored results) needs no torch; only computing does.
"""
