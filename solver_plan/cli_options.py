"""The command line's shared options: one spelling and one behaviour per option in every subcommand,
old spellings kept as hidden aliases, and requests built from parsed arguments.

Every subcommand adds its options through these functions, so `--memory-limit`, `--devices`,
`--precision`, `--seed`, `--quiet`, `--option` and `--time-limit` read and check the same way
everywhere; defaults come from `solver_plan.requests`. An alias (`--memory`, `--processors`, `-P`,
`hybrid --planner`, `simulate --plan`) stores into the same field, is hidden from --help, and
leaves a note (printed on stderr after a command that did not fail on its input). Errors name the
option as the user typed it (`build`).
"""
from __future__ import annotations

import argparse
from typing import Any

from solver_plan.errors import InputError
from solver_plan.requests import DEFAULT_CLUSTER, DEFAULT_PRECISION, DEFAULT_TIME_LIMIT_S, PRECISIONS

# request field -> the option naming it, where the two differ beyond '_' -> '-'
FIELD_OPTIONS = {"options": "--option", "global_batch": "--batch"}


class _Recorded(argparse.Action):
    """Stores the value and remembers the spelling used (`spelled`); an alias also leaves a note."""

    def __init__(self, option_strings, dest, *, preferred: str | None = None, **kwargs):
        self.preferred = preferred  # set on aliases: the spelling to use instead
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        if self.nargs == 0:
            values = self.const
        elif isinstance(self.default, list):  # append
            values = list(getattr(namespace, self.dest, None) or []) + [values]
        setattr(namespace, self.dest, values)
        spelled(namespace)[self.dest] = option_string
        if self.preferred is not None:
            notes = deprecations(namespace)
            note = f"{option_string} is deprecated; use {self.preferred}"
            if note not in notes:
                notes.append(note)


def spelled(namespace) -> dict[str, str]:
    """The option spellings the user typed, by destination field, kept on the parsed namespace (so errors name
    the option as typed).
    """
    if not hasattr(namespace, "_spelled"):
        namespace._spelled = {}
    return namespace._spelled


def deprecations(namespace) -> list[str]:
    """Notes about deprecated option spellings used, kept on the parsed namespace and printed after the
    command.
    """
    if not hasattr(namespace, "_deprecations"):
        namespace._deprecations = []
    return namespace._deprecations


def add(parser, name: str, *aliases: str, **kwargs) -> None:
    """`name` (shown in --help) and its hidden deprecated `aliases`, all storing into one field."""
    dest = kwargs.pop("dest", name.lstrip("-").replace("-", "_"))
    if kwargs.pop("action", None) == "store_true":
        kwargs.update(nargs=0, const=True, default=kwargs.get("default", False))
    parser.add_argument(name, action=_Recorded, dest=dest, **kwargs)
    if aliases:
        hidden = {k: v for k, v in kwargs.items() if k not in ("help", "required", "default")}
        parser.add_argument(*aliases, action=_Recorded, dest=dest, preferred=name, help=argparse.SUPPRESS,
                            default=argparse.SUPPRESS, **hidden)


def precision_choice(text: str) -> str:
    """--precision reads as the requests do: case and blanks ignored ('BF16' is bf16)."""
    return text.strip().lower()


def add_model(parser, help: str, *, default: str | None = None, required: bool = False) -> None:
    """Add `--model` with the subcommand's help text."""
    add(parser, "--model", default=default, required=required, help=help)


def add_cluster(parser, *, default: str | None = DEFAULT_CLUSTER, required: bool = False, help: str | None = None) -> None:
    """Add `--cluster`: a preset name or a cluster YAML file."""
    add(parser, "--cluster", default=default, required=required,
        help=help or f"preset name (`solver-plan clusters`) or YAML file (default {default})")


def add_devices(parser, *aliases: str, help: str = "use the first N devices of the cluster (default: all)") -> None:
    """Add `--devices` (the cluster's first N devices), with old spellings as hidden `aliases`."""
    add(parser, "--devices", *aliases, type=int, default=None, help=help)


def add_memory_limit(parser, *aliases: str, unlimited: bool = True) -> None:
    """Add `--memory-limit` (bytes such as 16GB, 'device' by default; 'none' for unlimited when `unlimited`),
    with old spellings as hidden `aliases`.
    """
    extra = "; 'none' = unlimited" if unlimited else ""
    add(parser, "--memory-limit", *aliases, default="device",
        help=f"per-device memory limit, e.g. 16GB; 'device' (default) = the device's memory{extra}")


def add_precision(parser, help: str) -> None:
    """Add `--precision`, a checked choice of PRECISIONS (case and blanks ignored)."""
    add(parser, "--precision", default=DEFAULT_PRECISION, type=precision_choice, choices=PRECISIONS, help=help)


def add_seed(parser) -> None:
    """Add `--seed`, the random seed of randomised planners (default 0)."""
    add(parser, "--seed", type=int, default=0, help="random seed of randomised planners (default 0)")


def add_solve_arguments(parser, option_help: str = "a planner option (repeatable), e.g. --option objective=sum; "
                                                    "see the planner's options") -> None:
    """--time-limit, --option, --quiet and --seed: shared by every command that solves."""
    add(parser, "--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S,
        help=f"wall-clock limit in seconds for the whole command, building the problem included "
             f"(default {DEFAULT_TIME_LIMIT_S:g}); on a time-out the best plan so far is printed")
    add(parser, "--option", action="append", default=[], metavar="KEY=VALUE", help=option_help)
    add(parser, "--quiet", action="store_true", help="no progress line on stderr during long solves")
    add_seed(parser)


def option_name(args, field: str) -> str:
    """The option that set request field `field`, as the user typed it."""
    return spelled(args).get(field) or FIELD_OPTIONS.get(field) or "--" + field.replace("_", "-")


def renamed(exc: InputError, args, fields) -> InputError:
    """`exc` with a request field of `fields` (first word of `where`) named as the option typed."""
    field, _, rest = (exc.where or "").partition(" ")
    if field not in fields:
        return exc
    message = str(exc)[len(f"{exc.where}: "):]
    return InputError(message, f"{option_name(args, field)}{' ' + rest if rest else ''}")


def build(request_type, args, **fields: Any):
    """A request of `request_type` from parsed `args`; a validation error names the option typed."""
    try:
        return request_type(**fields)
    except InputError as exc:
        raise renamed(exc, args, _field_names(request_type)) from None


def check(args, request, call, *a, **kw):
    """`call(*a, **kw)` for `request`: an InputError naming one of its fields names the option typed."""
    try:
        return call(*a, **kw)
    except InputError as exc:
        raise renamed(exc, args, _field_names(type(request))) from None


def _field_names(request_type) -> set[str]:
    from dataclasses import fields
    return {f.name for f in fields(request_type)}


def parse_options(args) -> dict[str, Any]:
    """`--option KEY=VALUE` (repeatable) -> options (values typed as `keyvalues.parse_option_value`)."""
    from solver_plan.keyvalues import parse_option_pairs
    return parse_option_pairs(getattr(args, "option", None) or (), option_name(args, "options"))


def add_export_arguments(parser, targets: tuple[str, ...]) -> None:
    """Add `--export TARGET` and `--export-out FILE` to a planning subcommand (plan, hybrid)."""
    parser.add_argument("--export", choices=targets, default=None,
                        help=f"also write the plan as a runtime configuration: {', '.join(targets)}")
    parser.add_argument("--export-out", default=None, help="file for --export (default: standard output)")


def check_export_arguments(args) -> None:
    """Before any work: an unwritable --export-out, or --export-out without --export, fails at once."""
    from solver_plan.files import check_output_path
    if getattr(args, "export_out", None):
        if not args.export:
            raise InputError("needs --export TARGET", "--export-out")
        check_output_path(args.export_out, "--export-out")


def write_export(args, plan_dict: dict, graph=None) -> None:
    """Write the plan as `--export` asks, through the writer the top-level command line put on `args`
    (`export_writer`): the exporters sit above the planning packages whose commands call this, so the
    command line, which may import every layer, hands the writer down instead of a planner importing up.
    Nothing without --export.
    """
    if getattr(args, "export", None):
        args.export_writer(args, plan_dict, graph)
