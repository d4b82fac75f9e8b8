"""Training and evaluating one run: a spec resolved once (:mod:`.resolve`), its data encoded and model built
(:mod:`.prepared`), the training loop (:mod:`.train`), evaluation (:mod:`.evaluate`), the whole run as a
stream of events (:mod:`.run`), sweeps of runs (:mod:`.sweep`), and what a step costs and achieves
(:mod:`.flops`, :mod:`.speed`)."""
