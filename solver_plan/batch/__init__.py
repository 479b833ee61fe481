"""Batch planning: YAML job files (`jobfile.load_jobs`), resumable runs (`run.run_batch` with the
local or Ray executor), one checksummed record per job (`records`, `store`); CLI `solver-plan batch`."""
