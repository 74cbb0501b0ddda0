"""What a run leaves: ``rows.jsonl`` (``results``, its keys in ``row_keys``), the tables
(``report``, ``report_bounds``, checked by ``row_check``) and the figures (``plots``). Reports read
rows, never the runner."""
