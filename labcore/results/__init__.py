"""What a finished run says: its record (:mod:`.record`), the metrics it is scored by (:mod:`.metrics`) and
comparisons of runs grouped by condition (:mod:`.compare`)."""
