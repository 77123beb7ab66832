"""A Jepsen-style soak of arrowlog: client processes that are killed, skewed and
fed scheduled faults write what they were told to histories; a checker compares
the histories with a final read of the log and names every anomaly.

    python -m tests.soak --store local|s3 --seconds N --seed S

See docs/testing.md ("Soak and history checker").
"""
