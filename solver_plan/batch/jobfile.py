"""Job files: YAML -> the tuple of `Job`s a batch runs, validated before anything runs.

```yaml
description: what this batch is for          # optional
defaults: {time_limit: 30, seed: 0}          # optional settings every job inherits
jobs:
  - name: resnet-v100                        # names the job in messages and reports
    kind: config                             # config (default) or pipeline
    models: [resnet50:batch=32, data/pipedream-profiles/vgg16/graph.txt]
    clusters: [v100x8-nvlink, my-cluster.yaml]   # presets or YAML files
    devices: [4, 8]                          # config jobs: first N devices (default: all)
    planners:                                # registry names, or mappings with their own settings
      - milp
      - {name: mcmc, seeds: [0, 1, 2], options: {iterations: 2000}}
    time_limit: 60                           # seconds (or "500ms"); default 60; null for none
    precision: bf16                          # config, pipeline, hybrid jobs: auto (default), fp32, tf32, bf16, fp16, fp8
    all_devices: false                       # config jobs: every operator on all devices
    memory_limit: 16GB
    max_candidates: 24                       # config jobs
    grace: 30                                # seconds past time_limit before the runner kills a job
  - name: resnet-pipeline
    kind: pipeline
    models: [resnet50:image=1000]
    clusters: [v100x8-nvlink]
    processors: [4, 8]                       # pipeline jobs: number of processors
    planners: [madpipe]
    schedule: exact                          # pipeline jobs: schedule planner
    optimizer: adam                          # pipeline jobs: adam (default), sgd-momentum, sgd, pipedream (3 x weights)
```
Each entry is a grid: every model x cluster x devices/processors x planner x seed. Relative file
paths are taken from the job file's folder first. Every error names the file, the job and the key
path; repeated jobs (same inputs) run once.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable

from solver_plan.batch.job import JOB_KINDS, Job
from solver_plan.batch.settings import Settings, read_settings, reject_foreign_keys
from solver_plan.errors import InputError
from solver_plan.planners import planners
from solver_plan.suite.spec import GENERATED_CLUSTER
from solver_plan.yamlio import Section, load_yaml


def load_jobs(path: str | Path) -> tuple[Job, ...]:
    """The jobs of the YAML job file at `path`, expanded over seeds, devices and processors and checked
    before anything runs (InputError naming the key); a job given twice runs once."""
    path = Path(path)
    top = Section(load_yaml(path), str(path))
    top.string("description")
    defaults_section = top.section("defaults")
    defaults = Settings()
    if defaults_section is not None:
        defaults = read_settings(defaults_section, defaults)
        defaults_section.close()
    entries = top.get("jobs", required=True)
    if not isinstance(entries, list) or not entries:
        raise InputError("expected a non-empty list of jobs", top.path("jobs"))
    top.close()
    reader = _JobReader(path)
    jobs: dict[str, Job] = {}
    for index, entry in enumerate(entries):
        for job in reader.read(entry, index, defaults):
            jobs.setdefault(job.key, job)
    return tuple(jobs.values())


class _JobReader:
    """Reads job entries of one file; checks each distinct model and cluster once."""

    def __init__(self, path: Path):
        self.path = path
        self.checked: set[tuple] = set()
        self.names: dict[str, int] = {}  # job name -> index of the entry using it

    def read(self, entry: object, index: int, defaults: Settings) -> list[Job]:
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str):
            _check_job_name(name, f"{self.path}: jobs[{index}].name")
        name = name if isinstance(name, str) and name else f"#{index + 1}"
        try:
            if name in self.names:  # reports and messages tell jobs apart by name
                raise InputError(f"name {name!r} is already used by jobs[{self.names[name]}]", f"jobs[{index}].name")
            self.names[name] = index
            return self._read(Section(entry, f"jobs[{index}]"), name, defaults)
        except InputError as exc:
            raise InputError(str(exc), f"{self.path}: job {name!r}") from None

    def _read(self, section: Section, name: str, defaults: Settings) -> list[Job]:
        section.string("name", required=True)
        kind = section.string("kind", "config")
        if kind not in JOB_KINDS:
            raise InputError(f"expected one of {', '.join(JOB_KINDS)}, got {kind!r}", section.path("kind"))
        reject_foreign_keys(section, kind)
        settings = read_settings(section, defaults)
        planner_entries = self._planners(section, kind, settings)
        section.get("models", required=True)
        generated = _generated_problems(section, kind)
        section.get("clusters", required=not generated)
        section.close()  # unknown keys are reported before models are built
        models = self._specs(section, "models", lambda spec, where: self._check_model(spec, where, kind))
        clusters = [(GENERATED_CLUSTER, [])] if generated else self._specs(
            section, "clusters", lambda spec, where: self._check_cluster(spec, None, where))
        jobs = []
        for model, model_files in models:
            for cluster, cluster_files in clusters:
                for planner, planner_settings in planner_entries:
                    jobs += self._grid(name, kind, model, cluster, planner, planner_settings,
                                       model_files + cluster_files, section)
        return jobs

    def _grid(self, name, kind, model, cluster, planner, settings: Settings, fingerprints,
              section: Section) -> list[Job]:
        is_config = kind == "config"
        uses_devices = kind in ("config", "hybrid")  # hybrid jobs plan on the first N devices too
        if cluster == GENERATED_CLUSTER:
            for key, value in (("devices", settings.devices != (None,)), ("memory_limit", settings.memory_limit),
                               ("max_candidates", settings.max_candidates)):
                if value:
                    raise InputError(f"generated problems set devices, candidates and memory in their spec "
                                     f"(e.g. random-dag:nodes=100,devices=8,memory=binding); remove {key!r}",
                                     section.path(key))
        if not uses_devices and settings.processors == (None,):
            raise InputError("pipeline jobs need 'processors' (a number or a list)", section.path("processors"))
        jobs = []
        for devices in settings.devices if uses_devices else (None,):
            if devices is not None:
                self._check_cluster(cluster, devices, section.path("devices"))
            for processors in (None,) if uses_devices else settings.processors:
                if processors is not None:  # pipeline processors are the cluster's first devices
                    self._check_cluster(cluster, processors, section.path("processors"))
                for seed in settings.seeds:
                    jobs.append(self._checked(Job(
                        group=name, kind=kind, model=model, cluster=cluster, planner=planner, seed=seed,
                        devices=devices, processors=processors, time_limit=settings.time_limit,
                        memory_limit=settings.memory_limit,
                        max_candidates=settings.max_candidates if is_config else None,
                        schedule=None if uses_devices else settings.schedule, options=settings.options,
                        precision=settings.precision,
                        all_devices=settings.all_devices if is_config else False,
                        optimizer=settings.optimizer if kind == "pipeline" else None,
                        grace=settings.grace, fingerprints=tuple(sorted(fingerprints))), section))
        return jobs

    @staticmethod
    def _checked(job: Job, section: Section) -> Job:
        """Checks that need the whole job: a hybrid job's options (as `run_job` reads them) and its
        precision against what its planner prices; refused when the jobs load, not when one runs."""
        if job.kind == "hybrid":
            _check_hybrid_options(job, section.path("options"))
        if job.kind == "hybrid" and job.precision is not None:
            _check_hybrid_precision(job, section.path("precision"))
        return job

    def _specs(self, section: Section, key: str, check: Callable[[str, str], None]) -> list[tuple[str, list]]:
        """Model or cluster specs: each as the worker will resolve it, with the digests of its files."""
        value = section.get(key, required=True)
        values = value if isinstance(value, list) else [value]
        if not values:
            raise InputError("expected a name or a non-empty list", section.path(key))
        specs = []
        for index, item in enumerate(values):
            where = section.path(key) + (f"[{index}]" if isinstance(value, list) else "")
            if not isinstance(item, str) or not item.strip():
                raise InputError(f"expected a name or a file path, got {item!r}", where)
            spec = self._local_path(item.strip())
            check(spec, where)
            specs.append((spec, self._fingerprint(spec, where)))
        return specs

    def _planners(self, section: Section, kind: str, settings: Settings) -> list[tuple[str, Settings]]:
        value = section.get("planners", required=True)
        values = value if isinstance(value, list) else [value]
        if not values:
            raise InputError("expected a planner name or a non-empty list", section.path("planners"))
        available = planners(kind)
        result = []
        for index, item in enumerate(values):
            where = section.path("planners") + (f"[{index}]" if isinstance(value, list) else "")
            entry_settings = settings
            if isinstance(item, dict):
                entry = Section(item, where)
                planner = entry.string("name", required=True)
                reject_foreign_keys(entry, kind)
                entry_settings = read_settings(entry, settings)
                entry.close()
                where = entry.path("name")
            else:
                planner = item
            if not isinstance(planner, str) or planner not in available:
                raise InputError(f"unknown {kind} planner {planner!r}; available: {', '.join(available) or 'none'}",
                                 where)
            available[planner].check_options(dict(entry_settings.options), where)
            if kind == "pipeline":
                self._check_schedule(entry_settings.schedule, section.path("schedule"))
            result.append((planner, entry_settings))
        return result

    def _check_schedule(self, schedule: str | None, where: str) -> None:
        available = planners("schedule")
        if schedule is not None and schedule not in available:
            raise InputError(f"unknown schedule planner {schedule!r}; available: {', '.join(available) or 'none'}",
                             where)

    def _check_model(self, spec: str, where: str, kind: str = "config") -> None:
        if ("model", spec, kind) in self.checked:
            return
        from solver_plan.graph.resolve import resolve_model
        from solver_plan.suite import check_problem_spec, is_problem_spec
        try:
            if kind == "pipeline" and _is_blocks_file(spec):  # pipeline jobs also take pipeline-blocks JSON
                from solver_plan.pipeline.sources import chain_from_blocks
                chain_from_blocks(spec)
            elif kind == "hybrid":  # a decoder-only transformer (or mixture of experts), read as its planner reads it
                from solver_plan.hybrid.model import transformer_spec
                from solver_plan.hybrid.moe_model import is_moe_model, moe_model
                moe_model(spec) if is_moe_model(spec) else transformer_spec(spec)
            else:
                check_problem_spec(spec) if is_problem_spec(spec) else resolve_model(spec)
        except InputError as exc:
            hint = ""
            if "=" in spec and ":" not in spec:  # YAML split "m:a=1,b=2" inside [...] at the comma
                hint = " (quote model specs that contain commas inside a [...] list)"
            raise InputError(f"{_reason(exc)}{hint}", where) from None
        self.checked.add(("model", spec, kind))

    def _check_cluster(self, spec: str, devices: int | None, where: str) -> None:
        if ("cluster", spec, devices) in self.checked:
            return
        from solver_plan.cluster import resolve_cluster
        try:
            resolve_cluster(spec, devices)
        except InputError as exc:
            raise InputError(_reason(exc), where) from None
        self.checked.add(("cluster", spec, devices))

    def _local_path(self, spec: str) -> str:
        """A relative path that exists next to the job file is taken from there (for model files,
        `hf:dir/config.json:seq=8`, the file part, keeping prefix and options)."""
        from solver_plan.graph.importers.graph_file import model_file_parts
        prefix, path, tail = model_file_parts(spec) or ("", spec, "")
        candidate = self.path.parent / path
        if not Path(path).is_absolute() and not Path(path).exists() and candidate.exists():
            return f"{prefix}{candidate}{tail}"
        return spec

    @staticmethod
    def _fingerprint(spec: str, where: str) -> list[tuple[str, str]]:
        from solver_plan.graph.importers.graph_file import model_file_parts
        path = Path((model_file_parts(spec) or ("", spec, ""))[1])
        if path.is_dir():
            path = path / "graph.txt"
        if not path.is_file():
            return []
        try:
            from solver_plan.files import read_input_bytes  # regular files only: a FIFO would block
            return [(spec, hashlib.sha256(read_input_bytes(path, "model file")).hexdigest()[:16])]
        except OSError as exc:
            raise InputError(f"cannot read file ({exc.strerror})", where) from None


MAX_JOB_NAME = 200


def _check_hybrid_options(job: Job, where: str) -> None:
    """`batch` (the global batch) and `fix` (pins) as `batch.kinds.job_request` reads them; on a
    mixture of experts (the expert-parallel planner, hybrid/moe_plan.py) its pins (ep, etp, capacity,
    ...), `routing` and `a2a_overlap` too (`_check_moe_options`)."""
    from solver_plan.hybrid.moe_model import is_moe_model
    from solver_plan.hybrid.search import check_global_batch
    from solver_plan.hybrid.space import parse_fix

    options = dict(job.options)
    if "batch" not in options:
        raise InputError("hybrid jobs need the option 'batch' (the global batch, a positive integer)", where)
    check_global_batch(options["batch"], f"{where}.batch")
    if is_moe_model(job.model):
        _check_moe_options(job, options, where)
        return
    for key in MOE_ONLY_OPTIONS:
        if key in options:
            raise InputError(f"{options[key]!r}: {key} is an option of mixtures of experts (a config.json of "
                             f"mixtral, qwen2_moe, qwen3_moe, deepseek_v2/v3), not of {job.model!r}", f"{where}.{key}")
    fix = options.get("fix")
    try:
        if isinstance(fix, str):
            parse_fix(fix)
        elif fix is not None:
            raise InputError(f"expected pins as text such as 'tp=8,pp=4', got {fix!r}", "fix")
    except InputError as exc:
        raise InputError(str(exc), f"{where}.fix") from None


MOE_ONLY_OPTIONS = ("routing", "a2a_overlap")


def _check_moe_options(job: Job, options: dict, where: str) -> None:
    """An expert-parallel job's pins (moe_space.check_fix: ep, etp, capacity, ...; ep dividing the
    experts, etp the expert width), routing (cost/routing.parse_load on the model's experts) and
    all-to-all overlap, each error naming the option key and the value."""
    from solver_plan.cost.routing import parse_load
    from solver_plan.hybrid.moe import A2A_OVERLAPS
    from solver_plan.hybrid.moe_model import moe_model
    from solver_plan.hybrid.moe_space import check_fix

    model = moe_model(job.model)
    fix = options.get("fix")
    try:
        if fix is not None and not isinstance(fix, str):
            raise InputError(f"expected pins as text such as 'ep=8,etp=1,capacity=1.25', got {fix!r}", "fix")
        pins = check_fix(fix)
        if "ep" in pins and model.experts % pins["ep"]:
            raise InputError(f"ep ({pins['ep']}) must divide the experts ({model.experts})", "fix")
        if "etp" in pins and model.expert_ffn % pins["etp"]:
            raise InputError(f"etp ({pins['etp']}) must divide the expert width ({model.expert_ffn})", "fix")
    except InputError as exc:
        raise InputError(f"{fix!r}: {_reason(exc).removeprefix('fix: ')}", f"{where}.fix") from None
    try:
        parse_load(options.get("routing"), model.experts)
    except InputError as exc:
        raise InputError(f"{options.get('routing')!r}: {_reason(exc).removeprefix('routing: ')}",
                         f"{where}.routing") from None
    overlap = options.get("a2a_overlap", "none")
    if overlap not in A2A_OVERLAPS:
        raise InputError(f"expects one of {', '.join(A2A_OVERLAPS)}, got {overlap!r}", f"{where}.a2a_overlap")


def _check_hybrid_precision(job: Job, where: str) -> None:
    """A hybrid job's precision on its devices: one the device has no units for is refused when the
    jobs load, not when one runs (every hybrid planner takes the precision)."""
    from solver_plan.cluster import resolve_cluster
    from solver_plan.cost.precision import TrainingPrecision, default_for
    device = resolve_cluster(job.cluster, job.devices).device
    asked = TrainingPrecision.parse(job.precision, device, where)
    if not device.supports(asked.compute):
        raise InputError(f"{device.name} has no {asked.compute.value} units; use precision: auto or "
                         f"{default_for(device).compute.value}", where)


def _check_job_name(name: str, where: str) -> None:
    """Names label records, reports and progress lines (and may name files one day): printable,
    no path separators, not '.' or '..', not blank, at most MAX_JOB_NAME characters."""
    if not name.strip():
        raise InputError("a job name must not be empty", where)
    if len(name) > MAX_JOB_NAME:
        raise InputError(f"a job name has at most {MAX_JOB_NAME} characters, got {len(name)}", where)
    if "/" in name or "\\" in name or name.strip() in (".", "..") or not name.isprintable():
        raise InputError(f"a job name is printable text without '/' or '\\\\' (and not '.' or '..'), got {name!r}",
                         where)


def _generated_problems(section: Section, kind: str) -> bool:
    """Whether the job's models are generated problems (solver_plan.suite), which carry their own
    devices and memory limit: such a job is a config job and names no cluster."""
    from solver_plan.suite import is_problem_spec
    value = section.get("models")
    flags = {is_problem_spec(item) for item in (value if isinstance(value, list) else [value])}
    if True not in flags:
        return False
    if len(flags) > 1:
        raise InputError("generated problems and other models cannot share a job; split it (and quote specs "
                         "that contain commas inside a [...] list)", section.path("models"))
    if kind != "config":
        raise InputError(f"generated problems are config jobs, not {kind!r}", section.path("kind"))
    if section.has("clusters"):
        raise InputError("generated problems carry their own devices; remove 'clusters'", section.path("clusters"))
    return True


def _is_blocks_file(spec: str) -> bool:
    """A pipeline-blocks JSON (checked as such; False for model files, which resolve_model reads)."""
    from solver_plan.pipeline.cli import check_blocks_file
    if Path(spec).suffix != ".json" or spec.startswith("hf:") or not Path(spec).is_file():
        return False
    return check_blocks_file(spec)


def _reason(exc: InputError) -> str:
    """The error without a command-line location ("--cluster", "model spec"): the job key replaces it."""
    text = str(exc)
    if exc.where and (exc.where.startswith("--") or exc.where == "model spec"):
        return text.removeprefix(f"{exc.where}: ")
    return text
