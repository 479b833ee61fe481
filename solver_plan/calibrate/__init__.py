"""`solver-plan calibrate`: fit a cluster's compute-efficiency and link parameters to measured
times (PipeDream per-layer profiles, or a CSV of profiler measurements) and write a cluster YAML.

measurements.py  kernels and measured times (the fit's input)
profiles.py      PipeDream graph.txt layers -> kernels (FLOPs and HBM bytes from the layer text)
csvfile.py       the user CSV (docs/calibration-csv.md) -> kernels and collective measurements
nnls.py          non-negative least squares (Lawson-Hanson), numpy only
fit.py           the fit: step-curve efficiencies, launch overhead, link latency and efficiency
output.py        the calibrated cluster as YAML (loadable by every command)
"""
