"""What only tests, the soak and trying things out use: stores that inject
faults (:mod:`~arrowlog.testing.scripted` by schedule,
:mod:`~arrowlog.testing.faulty` at random) and a throwaway S3 server
(:mod:`~arrowlog.testing.seaweedfs`, which ``arrowlog s3-server`` runs).

Nothing in the library's read or write paths imports this package; it ships in
the wheel so that ``arrowlog s3-server`` works and users can script faults
against their own code."""
