"""Comparison reports over batch records: `write.write_report` (Markdown, CSV, JSONL, PNG plots) from
`runs.load_runs` and `compare.compare`; CLI `solver-plan compare`."""
