"""`eops doctor`: gather a cluster snapshot (gather.py, the only I/O), run pure checks over it
(checks.py), and report them as a table or JSON (report.py)."""
