"""Who runs the queued jobs, and how: the local executor and its worker processes (:mod:`.executor`,
:mod:`.worker`), the Ray executor (:mod:`.ray_pump`, :mod:`.ray_task`) and Ray Tune (:mod:`.tune`). Both
kinds of claimer share one claim loop (:mod:`.claim_loop`: capacity, launch, poll, the fenced heartbeat) and
run each claimed job as one attempt (:mod:`.attempt`); :mod:`.pool` reserves cores and devices."""
