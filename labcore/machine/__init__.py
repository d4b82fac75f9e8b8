"""What the machine is and can do: its processor and accelerators (:mod:`.hardware`), the measured rates of
its matrix products (:mod:`.rates`), the device and precision a run uses (:mod:`.device`) and the threads it
may take beside other work (:mod:`.cores`)."""
