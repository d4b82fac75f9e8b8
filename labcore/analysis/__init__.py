"""Analyses of trained runs, computed by the worker and stored beside the run, read back by the pages.

* :mod:`.attention`: attention maps of one example under the pretrained, random and fine-tuned weights
  (FPT §3.5, Kao & Lee's attention similarity), plus pure head-matching helpers.
* :mod:`.similarity`: CCA, PWCCA and linear CKA between two representations, and layer-by-layer matrices of them.
* :mod:`.jacobian`: singular values of each example's output-input Jacobian (Kao & Lee F.1).
* :mod:`.gradients`: per-example gradients with torch.func and their pairwise cosines (Kao & Lee F.2).
* :mod:`.noise`: L2 distance of the outputs under Gaussian noise on every parameter (Kao & Lee F.3).
* :mod:`.params`: per-layer std of attention and feed-forward weight matrices (FPT §3.8, fig. 6).
* :mod:`.logme`: LogME, the maximum evidence of a Bayesian linear head on frozen features (You et al., 2021).

Importing this package (and reading stored results) needs no torch; only computing does.
"""
