"""`solver-plan calibrate`: fit a cluster to measurements and write a cluster YAML."""
from __future__ import annotations


def register_command(subparsers) -> None:
    """Add the `calibrate` subcommand and its options to the command line's subparsers."""
    parser = subparsers.add_parser(
        "calibrate", help="fit efficiency curves, launch overhead and link parameters to measurements",
        description="Fit a cluster's compute efficiency curves, launch overhead and link latency/efficiency "
                    "to measured times (PipeDream per-layer profiles and/or a calibration CSV, see "
                    "docs/calibration-csv.md) and write the calibrated cluster as YAML.")
    from solver_plan.requests import DEFAULT_CLUSTER
    parser.add_argument("--cluster", default=DEFAULT_CLUSTER, help=f"preset or YAML to start from (default {DEFAULT_CLUSTER})")
    parser.add_argument("--profile", action="append", default=[], metavar="PATH",
                        help="PipeDream graph.txt or its folder (repeatable); 'all' = every vendored profile "
                             "(measured on a V100, fp32: calibrate a V100 cluster with them)")
    parser.add_argument("--csv", action="append", default=[], metavar="PATH", help="calibration CSV (repeatable)")
    parser.add_argument("--out", required=True, help="write the calibrated cluster YAML here")
    parser.add_argument("--name", help="name of the calibrated cluster (default: <cluster>-calibrated)")
    parser.set_defaults(func=run)


def _profiles(values) -> list:
    from solver_plan.data import data_dir
    paths = []
    for value in values:
        if value == "all":
            paths.extend(sorted(p for p in (data_dir() / "pipedream-profiles").iterdir() if (p / "graph.txt").exists()))
        else:
            paths.append(value)
    return paths


def run(args) -> int:
    """Run `solver-plan calibrate` on parsed arguments: fit the cluster to the profiles and CSVs, write the
    calibrated YAML to --out, print the summary; returns the exit code.
    """
    from pathlib import Path

    from solver_plan.calibrate.api import calibrate
    from solver_plan.calibrate.output import write_cluster_yaml
    from solver_plan.cluster import resolve_cluster
    from solver_plan.cluster.loader import load_cluster
    from solver_plan.files import check_output_path

    check_output_path(args.out, "--out", (".yaml", ".yml"))
    cluster = resolve_cluster(args.cluster)
    profiles = _profiles(args.profile)
    result = calibrate(cluster, profiles, args.csv, name=args.name or f"{cluster.name}-calibrated")
    sources = [Path(p).name if args.profile == ["all"] else str(p) for p in profiles] + list(args.csv)
    header = (f"Calibrated by `solver-plan calibrate` from {args.cluster}.\n"
              f"Measurements: {', '.join(sources)}.\n" + result.summary())
    write_cluster_yaml(result.cluster, args.out, header)
    load_cluster(args.out)  # what we wrote must load (every command reads it this way)
    print(result.summary())
    print(f"wrote {args.out}")
    return 0
