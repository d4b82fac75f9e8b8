"""Runs leaving the lab: curves and hyper-parameters as TensorBoard event files (:mod:`.tensorboard`), and a
fine-tuned model as a folder ``transformers`` loads (:mod:`.model`). Each reads the store and the run's
folder only; nothing here changes a run."""
