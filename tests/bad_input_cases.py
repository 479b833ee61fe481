"""Generated bad inputs for every entry point of the command line (used by test_bad_input.py).

A case is a command line, the files it needs and the fragments its one-line error must contain.
Every case must end with exit status 2, exactly one line on stderr naming the file / key / value,
and no traceback. To add an entry point (say an ONNX importer), add a generator below and list it
in GENERATORS, or drop files into tests/bad_inputs/<folder>/ and map the folder in CORPUS_COMMANDS.

Placeholders in argv: {tmp} is the case's folder (where its files are written).
"""
from __future__ import annotations

import codecs
import copy
import json
from dataclasses import dataclass, field
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "bad_inputs"
# corpus folder -> command run on each of its files ({file} is the file's path)
CORPUS_COMMANDS = {
    "cluster": ["check", "{file}"],
    "profile": ["plan", "--model", "{file}", "--planner", "greedy"],
    "blocks": ["pipeline", "--model", "{file}", "-P", "2"],
    "jobs": ["batch", "{file}", "--out", "{tmp}/out"],
    "plan": ["simulate", "--plan", "{file}", "--model", "mlp:layers=2,hidden=64,batch=8", "--cluster", "v100x8-nvlink"],
    "onnx": ["plan", "--model", "{file}", "--planner", "greedy"],
    "hf": ["plan", "--model", "{file}", "--planner", "greedy"],
    "graph": ["plan", "--model", "{file}", "--planner", "greedy"],
}


@dataclass(frozen=True)
class Special:
    """A file that is not a regular file: `fifo`, `folder`, or `link:TARGET` (a symbolic link)."""
    kind: str


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    files: dict = field(default_factory=dict)  # name -> str or bytes
    expect: tuple[str, ...] = ()  # fragments of the error line ({tmp} substituted)
    known_issue: str | None = None  # a bug reported to its owner: the case runs as a non-strict xfail


# ---------------------------------------------------------------------------------------------
# Raw-file variants every file entry point must refuse (named by the file)
def _deep_yaml(depth: int) -> str:
    return "a: " + "[" * depth + "]" * depth + "\n"


def _deep_block_yaml(depth: int) -> str:
    return "".join(f"{'  ' * i}k{i}:\n" for i in range(depth)) + f"{'  ' * depth}v: 1\n"


def raw_file_variants(valid_text: str, json_like: bool = False) -> dict[str, bytes | str]:
    variants: dict[str, bytes | str] = {
        "empty": "",
        "blank": "\n\n   \n",
        "binary": bytes(range(256)) * 4,
        "utf16-bom": codecs.BOM_UTF16_LE + valid_text.encode("utf-16-le"),
        "utf16-no-bom": valid_text.encode("utf-16-le"),
        "latin1": valid_text.encode("utf-8") + "\n# caf\xe9\n".encode("latin-1"),
        "nul-byte": valid_text.encode() + b"\x00",
        "truncated-utf8": valid_text.encode() + "é".encode()[:1],
    }
    if json_like:
        variants.update({"deep-5000": "[" * 5000 + "]" * 5000, "deep-100000": "[" * 100000,
                         "not-json": "{this is not json", "list": "[1, 2, 3]", "string": '"text"'})
    else:
        variants.update({"comments-only": "# nothing here\n", "tilde": "~\n", "deep-5000": _deep_yaml(5000),
                         "deep-block-200": _deep_block_yaml(200), "list": "- 1\n- 2\n", "scalar": "hello\n",
                         "unclosed": "a: {b: [1, 2\n", "tab-indent": "a:\n\tb: 1\n",
                         "python-tag": "!!python/object/apply:os.system ['echo hi']\n",
                         "unhashable-key": "? [a, b]\n: 1\n", "bad-alias": "a: *nowhere\n"})
    return variants


# ---------------------------------------------------------------------------------------------
# Cluster YAML (`check FILE`; `plan --cluster FILE` for a sample)
CLUSTER = {
    "name": "tiny",
    "nodes": "2",
    "devices_per_node": "4",
    "device": {"name": "dev", "peak_flops": "100TFLOPS", "memory": "16GB"},
    "links": {"intra_node": {"bandwidth": "100GB/s", "latency": "5us"},
              "inter_node": {"bandwidth": "100Gb/s", "latency": "5us"}},
}


def render_yaml(tree: dict, indent: int = 0) -> str:
    """Block YAML whose leaves are raw YAML text (so '.nan', '-16GB' or '[1]' reach the parser as is)."""
    lines = []
    for key, value in tree.items():
        if isinstance(value, dict):
            lines.append(f"{'  ' * indent}{key}:")
            lines.append(render_yaml(value, indent + 1))
        else:
            lines.append(f"{'  ' * indent}{key}: {value}".rstrip())
    return "\n".join(lines)


def _set(tree: dict, path: str, value) -> dict:
    tree = copy.deepcopy(tree)
    *parents, leaf = path.split(".")
    node = tree
    for part in parents:
        node = node[part]
    if value is _DELETE:
        del node[leaf]
    else:
        node[leaf] = value
    return tree


def _rename(tree: dict, path: str, new: str) -> dict:
    tree = copy.deepcopy(tree)
    *parents, leaf = path.split(".")
    node = tree
    for part in parents:
        node = node[part]
    node[new] = node.pop(leaf)
    return tree


_DELETE = object()
NUMBERS_BAD = ["null", "abc", "0", "-1", "1.5", "true", "[1]", "{a: 1}", "''"]
SIZES_BAD = ["null", "abc", "0", "-16GB", "-1", ".inf", ".nan", "true", "[1]", "{a: 1}", "16GB/s", "1e999GB"]
CLUSTER_BAD_VALUES = {
    "name": ["null", "5", "[1]", "{a: 1}"],
    "nodes": NUMBERS_BAD + ["1000000000", "99999999999999999999999"],
    "devices_per_node": NUMBERS_BAD + ["100000"],
    "device": ["null", "abc", "[1]", "5"],
    "device.name": ["null", "5", "[a]"],
    "device.peak_flops": SIZES_BAD[:-2] + ["5TB", "-5TFLOPS"],
    "device.memory": SIZES_BAD,
    "links": ["null", "abc", "[1]"],
    "links.intra_node": ["null", "abc", "5"],
    "links.intra_node.bandwidth": ["null", "abc", "0", "-100GB/s", ".inf", ".nan", "true", "[1]", "100GB"],
    "links.intra_node.latency": ["abc", "-1", "-5us", "true", "[1]", ".inf", "5GB"],
    "links.inter_node": ["null", "abc"],
    "links.inter_node.bandwidth": ["null", "-1Gb/s", "abc"],
}
# Optional keys of the compute and link models (cost model engineer's): bad values of each
CLUSTER_OPTIONAL_BAD = {
    "device.matrix_flops": ["abc", "{fp16: -1TFLOPS}", "{fp99: 1TFLOPS}", "[1]", "{fp16: abc}"],
    "device.vector_flops": ["abc", "{fp32: 0}"],
    "device.hbm_bandwidth": ["-1GB/s", "abc"],
    "device.matrix_efficiency": ["abc", "[[1, 2]]", "[[-1, 0.5]]", "[1, 2]", "[[1, .nan]]"],
    "device.launch_overhead": ["-1us", "abc", "[1]"],
    "device.fp8_scaling": ["blocks", "1", "[block]"],
    "device.host_cpu": ["arm", "1", "[grace]"],
    "links.intra_node.efficiency": ["2", "-0.5", "abc", "0"],
    "links.inter_node.nics_per_node": ["0", "-1", "abc", "1.5"],
}
CLUSTER_REQUIRED = ["devices_per_node", "device", "device.peak_flops", "device.memory", "links",
                    "links.intra_node", "links.intra_node.bandwidth", "links.inter_node"]
CLUSTER_TYPOS = {"devices_per_node": "devices_per_nod", "device.memory": "memroy",
                 "links.intra_node.bandwidth": "bandwith", "device.peak_flops": "peak_flop",
                 "links.intra_node": "intra_nod", "device": "devise", "links": "lniks"}


def cluster_cases() -> list[Case]:
    cases = []
    for path, values in CLUSTER_BAD_VALUES.items():
        leaf = path.split(".")[-1]
        for value in values:
            text = render_yaml(_set(CLUSTER, path, value)) + "\n"
            cases.append(Case(f"cluster-{path}={value}", ("check", "{tmp}/c.yaml"), {"c.yaml": text},
                              ("c.yaml", leaf)))
    for path, values in CLUSTER_OPTIONAL_BAD.items():
        leaf = path.split(".")[-1]
        for value in values:
            text = render_yaml(_set(CLUSTER, path, value)) + "\n"
            cases.append(Case(f"cluster-{path}={value}", ("check", "{tmp}/c.yaml"), {"c.yaml": text}, ("c.yaml", leaf)))
    for path in CLUSTER_REQUIRED:
        text = render_yaml(_set(CLUSTER, path, _DELETE)) + "\n"
        cases.append(Case(f"cluster-missing-{path}", ("check", "{tmp}/c.yaml"), {"c.yaml": text},
                          ("c.yaml", path.split(".")[-1])))
    for path, typo in CLUSTER_TYPOS.items():
        text = render_yaml(_rename(CLUSTER, path, typo)) + "\n"
        right = path.split(".")[-1]
        cases.append(Case(f"cluster-typo-{typo}", ("check", "{tmp}/c.yaml"), {"c.yaml": text},
                          ("c.yaml", f"unknown key {typo!r} (did you mean {right!r}?)")))
    for section in ("", "device.", "links.", "links.intra_node."):
        text = render_yaml(_set(CLUSTER, section + "colour", "red")) + "\n"
        cases.append(Case(f"cluster-unknown-key-{section}colour", ("check", "{tmp}/c.yaml"), {"c.yaml": text},
                          ("c.yaml", "unknown key 'colour'")))
    base = render_yaml(CLUSTER) + "\n"
    for key in ("devices_per_node: 8", "  memory: 32GB", "name: other"):
        indent = key[: len(key) - len(key.lstrip())]
        anchor = {"devices_per_node: 8": "devices_per_node: 4", "  memory: 32GB": "  memory: 16GB",
                  "name: other": "name: tiny"}[key]
        text = base.replace(anchor, f"{anchor}\n{indent}{key.strip()}")
        name = key.split(":")[0].strip()
        cases.append(Case(f"cluster-duplicate-{name}", ("check", "{tmp}/c.yaml"), {"c.yaml": text},
                          ("c.yaml", "duplicate key", name)))
    for variant, content in raw_file_variants(base).items():
        cases.append(Case(f"cluster-file-{variant}", ("check", "{tmp}/c.yaml"), {"c.yaml": content}, ("c.yaml",)))
    cases += [
        Case("cluster-no-such-file", ("check", "{tmp}/none.yaml"), {}, ("none.yaml",)),
        Case("cluster-folder", ("check", "{tmp}/d.yaml"), {"d.yaml/x": "a"}, ("d.yaml",)),
        Case("cluster-unknown-preset", ("plan", "--cluster", "tpu-pod"), {}, ("tpu-pod",)),
        Case("cluster-plan-binary", ("plan", "--cluster", "{tmp}/c.yaml"), {"c.yaml": b"\x89PNG\r\n\x1a\n\x00"},
             ("c.yaml",)),
        Case("cluster-plan-nodes-null", ("plan", "--cluster", "{tmp}/c.yaml"),
             {"c.yaml": render_yaml(_set(CLUSTER, "nodes", "null")) + "\n"}, ("c.yaml", "nodes")),
        Case("cluster-pipeline-dpn-null", ("pipeline", "--model", "lenet", "-P", "2", "--cluster", "{tmp}/c.yaml"),
             {"c.yaml": render_yaml(_set(CLUSTER, "devices_per_node", "null")) + "\n"}, ("c.yaml", "devices_per_node")),
    ]
    return cases


# ---------------------------------------------------------------------------------------------
# Model specs (`plan --model SPEC`): every zoo model, and every kind of bad value on a few of them
FULLY_MUTATED_MODELS = ("mlp", "resnet50", "gpt2", "gpt3-175B")


def model_cases() -> list[Case]:
    from solver_plan.graph.zoo import model_names, model_options

    cases = []
    for name in model_names():
        options = model_options(name)
        ints = [key for key, value in options.items() if isinstance(value, int) and not isinstance(value, bool)]
        specs = [(f"{name}:nope=1", "nope")]
        for key in ints[:2] if name in FULLY_MUTATED_MODELS else ints[:1]:
            specs += [(f"{name}:{key}=0", key), (f"{name}:{key}=99999999999999999999999", key)]
            if name in FULLY_MUTATED_MODELS:
                specs += [(f"{name}:{key}", key), (f"{name}:{key}=-3", key), (f"{name}:{key}=abc", "abc"),
                          (f"{name}:{key}=nan", "nan"), (f"{name}:{key}=2.5", "2.5")]
        for spec, fragment in specs:
            cases.append(Case(f"model-{spec}", ("plan", "--model", spec, "--planner", "greedy"), {}, (fragment,)))
    for spec, fragment in [("resnet51", "resnet51"), (":batch=2", "missing model name"), ("mlp:=3", "key=value"),
                           ("mlp:batch=1,batch=2", "twice"), ("mlp:batch=inf", "inf"), ("mlp:batch=1e3", "1e3"),
                           ("mlp:layers=100000", "layers"), ("mlp:batch=16000000,hidden=16000000", "elements"),
                           ("  ", "empty model spec"), ("mlp:batch==2", "batch"), ("missing/graph.txt", "missing/graph.txt"),
                           ("{tmp}", "profile")]:
        cases.append(Case(f"model-spec-{spec.strip() or 'blank'}", ("plan", "--model", spec, "--planner", "greedy"),
                          {}, (fragment,)))
    cases.append(Case("model-pipeline-unknown", ("pipeline", "--model", "resnet51", "-P", "2"), {}, ("resnet51",)))
    cases.append(Case("model-simulate-overflow", ("simulate", "--plan", "{tmp}/p.json", "--model",
                                                  "mlp:batch=99999999999999999999999"),
                      {"p.json": json.dumps({"schema_version": 1, "cluster": "v100x8-nvlink", "operators": []})},
                      ("batch",)))
    return cases


# ---------------------------------------------------------------------------------------------
# PipeDream profiles (`plan --model graph.txt`; pipeline for a sample)
def _node(i: int, fwd="1.0", bwd="2.0", act="4096.0", par="64.0", desc="Linear(4, 4)") -> str:
    return (f"node{i} -- {desc} -- forward_compute_time={fwd}, backward_compute_time={bwd}, "
            f"activation_size={act}, parameter_size={par}")


PROFILE_NODES = [_node(1), _node(2), _node(3)]
PROFILE_EDGES = ["\tnode1 -- node2", "\tnode2 -- node3"]


def _profile(nodes=None, edges=None) -> str:
    return "\n".join((nodes if nodes is not None else PROFILE_NODES) + (edges if edges is not None else PROFILE_EDGES)) + "\n"


def profile_cases() -> list[Case]:
    bad = {
        "no-edges": (_profile(edges=[]), ("no edge lines",)),
        "disconnected-node": (_profile(nodes=PROFILE_NODES + [_node(4)]), ("g.txt:4", "node4")),
        "edge-unknown-node": (_profile(edges=PROFILE_EDGES + ["\tnode3 -- node9"]), ("g.txt:6", "node9")),
        "cycle": (_profile(edges=PROFILE_EDGES + ["\tnode3 -- node1"]), ("cycle",)),
        "self-loop": (_profile(edges=PROFILE_EDGES + ["\tnode2 -- node2"]), ("cycle",)),
        "duplicate-node": (_profile(nodes=PROFILE_NODES + [_node(2)]), ("node2", "twice")),
        "fwd-text": (_profile(nodes=[_node(1, fwd="fast")] + PROFILE_NODES[1:]), ("g.txt:1", "forward_compute_time")),
        "fwd-negative": (_profile(nodes=[_node(1, fwd="-1.0")] + PROFILE_NODES[1:]), ("g.txt:1", "forward_compute_time")),
        "bwd-nan": (_profile(nodes=[_node(1, bwd="nan")] + PROFILE_NODES[1:]), ("g.txt:1", "backward_compute_time")),
        "bwd-inf": (_profile(nodes=[_node(1, bwd="1e999")] + PROFILE_NODES[1:]), ("g.txt:1", "backward_compute_time")),
        "act-empty-list": (_profile(nodes=[_node(1, act="[]")] + PROFILE_NODES[1:]), ("g.txt:1", "activation_size")),
        "act-huge": (_profile(nodes=[_node(1, act="1e300")] + PROFILE_NODES[1:]), ("g.txt", "node1")),
        "par-text": (_profile(nodes=[_node(1, par="x")] + PROFILE_NODES[1:]), ("g.txt:1", "parameter_size")),
        "missing-stat": (_profile(nodes=[_node(1).replace(", parameter_size=64.0", "")] + PROFILE_NODES[1:]),
                         ("g.txt:1", "parameter_size")),
        "unknown-stat": (_profile(nodes=[_node(1) + ", colour=3"] + PROFILE_NODES[1:]), ("g.txt:1", "colour")),
        "no-separator": (_profile(nodes=["node1 Linear forward_compute_time=1"] + PROFILE_NODES[1:]), ("g.txt:1",)),
        "bad-edge": (_profile(edges=["\tnode1 node2"]), ("g.txt:4", "edge")),
        "only-edges": ("\tnode1 -- node2\n", ("g.txt", "no node lines")),
    }
    cases = [Case(f"profile-{key}", ("plan", "--model", "{tmp}/g.txt", "--planner", "greedy"), {"g.txt": text}, expect)
             for key, (text, expect) in bad.items()]
    for variant, content in raw_file_variants(_profile()).items():
        if variant in ("comments-only", "tilde", "list", "scalar", "unclosed", "tab-indent", "python-tag",
                       "unhashable-key", "bad-alias", "deep-block-200"):
            continue  # YAML-specific
        cases.append(Case(f"profile-file-{variant}", ("plan", "--model", "{tmp}/g.txt", "--planner", "greedy"),
                          {"g.txt": content}, ("g.txt",)))
    for key in ("no-edges", "disconnected-node", "cycle"):
        text, expect = bad[key]
        cases.append(Case(f"profile-pipeline-{key}", ("pipeline", "--model", "{tmp}/g.txt", "-P", "2"),
                          {"g.txt": text}, expect))
    cases.append(Case("profile-folder-without-graph", ("plan", "--model", "{tmp}/prof/"), {"prof/readme": "x"},
                      ("prof",)))
    return cases


# ---------------------------------------------------------------------------------------------
# Pipeline-blocks JSON (`pipeline --model blocks.json -P 2`)
BLOCKS = {"model": {"hidden_dim": 1024, "seq_len": 256}, "Mparams": 48.05, "Mf": 34.5,
          "Tf": 0.75, "Tb": 0.823, "Tw": 0.633}


def blocks_cases() -> list[Case]:
    cases = []
    argv = ("pipeline", "--model", "{tmp}/b.json", "-P", "2")
    for key in ("Tf", "Tb", "Tw", "Mparams", "Mf"):
        for label, value in (("missing", _DELETE), ("text", "abc"), ("null", None), ("negative", -1.0),
                             ("bool", True), ("list", [1])):
            data = copy.deepcopy(BLOCKS)
            if value is _DELETE:
                del data[key]
            else:
                data[key] = value
            cases.append(Case(f"blocks-{key}-{label}", argv, {"b.json": json.dumps(data)}, ("b.json", key)))
        data = copy.deepcopy(BLOCKS)
        cases.append(Case(f"blocks-{key}-infinite", argv,
                          {"b.json": json.dumps(data).replace(json.dumps(data[key]), "1e999", 1)}, ("b.json", key)))
    for key in ("hidden_dim", "seq_len"):
        for label, value in (("missing", _DELETE), ("text", "x"), ("zero", 0), ("negative", -4), ("float", 2.5)):
            data = copy.deepcopy(BLOCKS)
            if value is _DELETE:
                del data["model"][key]
            else:
                data["model"][key] = value
            cases.append(Case(f"blocks-model.{key}-{label}", argv, {"b.json": json.dumps(data)}, ("b.json", key)))
    data = copy.deepcopy(BLOCKS)
    del data["model"]
    cases.append(Case("blocks-no-model", argv, {"b.json": json.dumps(data)}, ("b.json", "model")))
    for variant, content in raw_file_variants(json.dumps(BLOCKS), json_like=True).items():
        cases.append(Case(f"blocks-file-{variant}", argv, {"b.json": content}, ("b.json",)))
    cases.append(Case("blocks-duplicate-key", argv, {"b.json": json.dumps(BLOCKS)[:-1] + ', "Tf": 9}'},
                      ("b.json", "duplicate key 'Tf'")))
    cases.append(Case("blocks-nan-literal", argv, {"b.json": json.dumps(BLOCKS).replace("0.75", "NaN")},
                      ("b.json", "NaN")))
    cases.append(Case("blocks-no-such-file", ("pipeline", "--model", "{tmp}/none.json", "-P", "2"), {}, ("none.json",)))
    return cases


# ---------------------------------------------------------------------------------------------
# Job files (`batch FILE --out DIR`)
JOB = {"description": "bad-input suite",
       "defaults": {"time_limit": "5", "seed": "0"},  # raw YAML: 5 and 0
       "jobs": "\n" + "\n".join([
           "  - name: small",
           "    models: ['mlp:layers=2,hidden=64,batch=8']",
           "    clusters: [v100x8-nvlink]",
           "    planners: [greedy]",
           "    devices: [4]",
           "    time_limit: 5",
           "    memory_limit: 16GB",
           "    max_candidates: 8",
           "    seeds: [0, 1]",
       ])}


def _job_text(replace: tuple[str, str] | None = None, append: str = "") -> str:
    text = render_yaml(JOB) + "\n" + append
    if replace is not None:
        old, new = replace
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def job_cases() -> list[Case]:
    argv = ("batch", "{tmp}/j.yaml", "--out", "{tmp}/out")
    line_swaps = {
        "typo-planners": ("    planners: [greedy]", "    planers: [greedy]", ("unknown key 'planers' (did you mean 'planners'?)",)),
        "typo-models": ("    models:", "    modles:", ("modles", "models")),
        "typo-clusters": ("    clusters:", "    clustres:", ("clustres", "clusters")),
        "typo-name": ("  - name: small", "  - nmae: small", ("nmae", "name")),
        "typo-time_limit": ("    time_limit: 5", "    time_limt: 5", ("time_limt", "time_limit")),
        "typo-jobs": ("jobs:", "jbos:", ("jbos", "jobs")),
        "unknown-planner": ("[greedy]", "[gurobi]", ("gurobi",)),
        "unknown-model": ("['mlp:layers=2,hidden=64,batch=8']", "[resnet51]", ("resnet51",)),
        "unknown-cluster": ("[v100x8-nvlink]", "[tpu-pod]", ("tpu-pod",)),
        "model-overflow": ("['mlp:layers=2,hidden=64,batch=8']", "['mlp:batch=99999999999999999999999']", ("batch",)),
        "devices-too-many": ("devices: [4]", "devices: [64]", ("devices",)),
        "devices-zero": ("devices: [4]", "devices: [0]", ("devices",)),
        "devices-text": ("devices: [4]", "devices: [four]", ("devices", "four")),
        "devices-null": ("devices: [4]", "devices: [null]", ("devices",)),
        "time-limit-zero": ("    time_limit: 5", "    time_limit: 0", ("time_limit",)),
        "time-limit-negative": ("    time_limit: 5", "    time_limit: -5", ("time_limit",)),
        "time-limit-text": ("    time_limit: 5", "    time_limit: soon", ("time_limit", "soon")),
        "time-limit-list": ("    time_limit: 5", "    time_limit: [5]", ("time_limit",)),
        "memory-negative": ("memory_limit: 16GB", "memory_limit: -16GB", ("memory_limit",)),
        "memory-text": ("memory_limit: 16GB", "memory_limit: lots", ("memory_limit", "lots")),
        "max-candidates-one": ("max_candidates: 8", "max_candidates: 1", ("max_candidates",)),
        "max-candidates-text": ("max_candidates: 8", "max_candidates: many", ("max_candidates",)),
        "seeds-negative": ("seeds: [0, 1]", "seeds: [-1]", ("seeds",)),
        "seeds-empty": ("seeds: [0, 1]", "seeds: []", ("seeds",)),
        "seeds-repeated": ("seeds: [0, 1]", "seeds: [1, 1]", ("seeds",)),
        "seed-and-seeds": ("seeds: [0, 1]", "seeds: [0, 1]\n    seed: 3", ("seed",)),
        "processors-in-config": ("devices: [4]", "devices: [4]\n    processors: [2]", ("processors",)),
        "kind-unknown": ("  - name: small", "  - name: small\n    kind: magic", ("kind", "magic")),
        "name-null": ("  - name: small", "  - name:", ("name",)),
        "planners-empty": ("    planners: [greedy]", "    planners: []", ("planners",)),
        "planner-option-unknown": ("    planners: [greedy]", "    planners: [{name: greedy, options: {colour: 1}}]",
                                   ("colour",)),
        "options-mapping-value": ("    planners: [greedy]", "    planners: [{name: greedy, options: {x: {y: 1}}}]", ("x",)),
        "duplicate-key": ("    time_limit: 5", "    time_limit: 5\n    time_limit: 6", ("duplicate key", "time_limit")),
        "models-empty": ("['mlp:layers=2,hidden=64,batch=8']", "[]", ("models",)),
        "models-number": ("['mlp:layers=2,hidden=64,batch=8']", "[5]", ("models",)),
        "grace-negative": ("    seeds: [0, 1]", "    seeds: [0, 1]\n    grace: -3", ("grace",)),
        "defaults-typo": ("  time_limit: 5", "  time_limt: 5", ("time_limt",)),
        "defaults-list": ("defaults:", "defaults: [1]\nunused:", ("defaults",)),
        "description-number": ("description: bad-input suite", "description: 5", ("description",)),
    }
    cases = [Case(f"jobs-{key}", argv, {"j.yaml": _job_text((old, new))}, ("j.yaml",) + expect)
             for key, (old, new, expect) in line_swaps.items()]
    cases.append(Case("jobs-duplicate-name", argv,
                      {"j.yaml": _job_text(append="  - name: small\n    models: [lenet]\n    clusters: [v100x8-nvlink]\n"
                                                  "    planners: [greedy]\n")}, ("j.yaml", "small")))
    cases.append(Case("jobs-empty-list", argv, {"j.yaml": "jobs: []\n"}, ("j.yaml", "jobs")))
    cases.append(Case("jobs-not-a-list", argv, {"j.yaml": "jobs: 5\n"}, ("j.yaml", "jobs")))
    cases.append(Case("jobs-entry-scalar", argv, {"j.yaml": "jobs: [hello]\n"}, ("j.yaml",)))
    cases.append(Case("jobs-missing", argv, {"j.yaml": "description: x\n"}, ("j.yaml", "jobs")))
    for variant, content in raw_file_variants(_job_text()).items():
        cases.append(Case(f"jobs-file-{variant}", argv, {"j.yaml": content}, ("j.yaml",)))
    cases.append(Case("jobs-no-such-file", ("batch", "{tmp}/none.yaml", "--out", "{tmp}/out"), {}, ("none.yaml",)))
    cases.append(Case("jobs-compare-filter-bad", ("compare", "{tmp}/recs", "--jobs", "{tmp}/j.yaml"),
                      {"j.yaml": b"\xff\xfe\x00", "recs/x.json": "{}"}, ("j.yaml",)))
    return cases


# ---------------------------------------------------------------------------------------------
# Plan JSON (`simulate --plan FILE`); `plan_document` is a valid plan of PLAN_MODEL on PLAN_CLUSTER
PLAN_MODEL = "mlp:layers=2,hidden=64,batch=8"
PLAN_CLUSTER = "v100x8-nvlink"


def plan_cases(plan_document: dict) -> list[Case]:
    argv = ("simulate", "--plan", "{tmp}/p.json")

    def edit(change) -> str:
        data = copy.deepcopy(plan_document)
        change(data)
        return json.dumps(data)

    ops = plan_document["operators"]
    last = len(ops) - 1
    edits = {
        "schema-99": (lambda d: d.update(schema_version=99), ("schema_version", "99")),
        "schema-missing": (lambda d: d.pop("schema_version"), ("schema_version",)),
        "schema-string": (lambda d: d.update(schema_version="1"), ("schema_version", "'1'")),
        "schema-float": (lambda d: d.update(schema_version=1.5), ("schema_version",)),
        "schema-bool": (lambda d: d.update(schema_version=True), ("schema_version",)),
        "schema-null": (lambda d: d.update(schema_version=None), ("schema_version",)),
        "schema-zero": (lambda d: d.update(schema_version=0), ("schema_version",)),
        "operators-missing": (lambda d: d.pop("operators"), ("operators",)),
        "operators-mapping": (lambda d: d.update(operators={}), ("operators",)),
        "operators-empty": (lambda d: d.update(operators=[]), ("operators",)),
        "operator-scalar": (lambda d: d["operators"].__setitem__(0, 5), ("operators[0]",)),
        "operator-no-name": (lambda d: d["operators"][0].pop("name"), ("operators[0]", "name")),
        "operator-unknown": (lambda d: d["operators"][0].update(name="nope"), ("operators[0]", "nope")),
        "operator-twice": (lambda d: d["operators"].append(copy.deepcopy(d["operators"][0])), ("twice",)),
        "operator-missing": (lambda d: d["operators"].pop(), ("no configuration",)),
        "degrees-list": (lambda d: d["operators"][last].update(degrees=[2]), ("degrees",)),
        "degree-unknown-dim": (lambda d: d["operators"][last].update(degrees={"colour": 2}), ("colour",)),
        "degree-zero": (lambda d: d["operators"][last].update(degrees={"sample": 0}), ("sample",)),
        "degree-string": (lambda d: d["operators"][last].update(degrees={"sample": "2"}), ("sample",)),
        "degree-not-dividing": (lambda d: d["operators"][last].update(degrees={"sample": 3}, devices=[0, 1, 2]),
                                ("sample",)),
        "devices-empty": (lambda d: d["operators"][last].update(devices=[]), ("devices",)),
        "devices-out-of-range": (lambda d: d["operators"][last].update(degrees={"sample": 2}, devices=[0, 99]),
                                 ("devices", "99")),
        "devices-negative": (lambda d: d["operators"][last].update(degrees={"sample": 2}, devices=[0, -1]),
                             ("devices", "-1")),
        "devices-repeat": (lambda d: d["operators"][last].update(degrees={"sample": 2}, devices=[1, 1]),
                           ("devices", "repeat")),
        "devices-strings": (lambda d: d["operators"][last].update(devices=["0"]), ("devices",)),
        "devices-count": (lambda d: d["operators"][last].update(degrees={"sample": 2}, devices=[0]), ("devices",)),
        "model-missing": (lambda d: d.pop("model"), ("model",)),
        "model-unknown": (lambda d: d.update(model="resnet51"), ("resnet51",)),
        "model-overflow": (lambda d: d.update(model="mlp:batch=99999999999999999999999"), ("batch",)),
        "cluster-missing": (lambda d: d.pop("cluster"), ("cluster",)),
        "cluster-unknown": (lambda d: d.update(cluster="tpu-pod"), ("tpu-pod",)),
        "cluster-number": (lambda d: d.update(cluster=5), ("cluster",)),
    }
    cases = [Case(f"plan-{key}", argv, {"p.json": edit(change)}, expect) for key, (change, expect) in edits.items()]
    cases.append(Case("plan-duplicate-key", argv, {"p.json": json.dumps(plan_document)[:-1] + ', "model": "lenet"}'},
                      ("p.json", "duplicate key 'model'")))
    for variant, content in raw_file_variants(json.dumps(plan_document), json_like=True).items():
        cases.append(Case(f"plan-file-{variant}", argv, {"p.json": content}, ("p.json",)))
    cases.append(Case("plan-no-such-file", ("simulate", "--plan", "{tmp}/none.json"), {}, ("none.json",)))
    return cases


# ---------------------------------------------------------------------------------------------
# Command-line numbers and paths
def cli_cases() -> list[Case]:
    plan = ("plan", "--model", "mlp:layers=2,hidden=64,batch=8", "--planner", "greedy")
    pipe = ("pipeline", "--model", "lenet", "-P", "2", "--planner", "pipedream", "--schedule", "1f1b*")
    blocks = ("pipeline", "--model", "{tmp}/b.json", "-P", "2")
    simulate = ("simulate", "--plan", "{tmp}/p.json", "--model", PLAN_MODEL, "--cluster", PLAN_CLUSTER)
    numbers = [
        (plan, "--devices", ["0", "-1", "abc", "9", "1000000000", "1.5"]),
        (plan, "--time-limit", ["0", "-1", "abc", "nan", "inf", "-inf"]),
        (plan, "--memory-limit", ["-16GB", "abc", "0", "16GB/s", "nan", "-1"]),
        (plan, "--max-candidates", ["0", "1", "-5", "abc"]),
        (plan, "--rows", ["0", "-1", "abc"]),
        (plan, "--seed", ["abc", "1.5"]),
        (pipe, "--memory", ["-16GB", "abc", "0", "-1"]),
        (pipe, "--bandwidth", ["-16GB/s", "abc", "0", "16GB"]),
        (pipe, "--time-limit", ["0", "-1", "nan", "abc"]),
        (pipe, "--max-layers", ["0", "-1", "abc"]),
        (("pipeline", "--model", "lenet", "--planner", "pipedream"), "--processors", ["0", "-1", "abc", "100000"]),
        (blocks, "--blocks", ["0", "-1", "1000000", "abc"]),
        (pipe, "--blocks", ["4"]),  # a zoo model has no blocks
        (("batch", "{tmp}/j.yaml", "--out", "{tmp}/out"), "--workers", ["0", "-1", "abc"]),
        (("compare", "{tmp}/recs"), "--target-gap", ["-1", "2", "abc", "nan"]),
        (simulate, "--devices", ["0", "-2", "abc", "99"]),
    ]
    files = {"b.json": json.dumps(BLOCKS), "j.yaml": "jobs: [{name: a, models: [lenet], clusters: [v100x8-nvlink], "
                                                      "planners: [greedy]}]\n",
             "p.json": json.dumps({"schema_version": 1, "operators": []}), "recs/.keep": ""}
    cases = []
    for base, option, values in numbers:
        for value in values:
            for form in ("space", "equals") if value.startswith("-") else ("space",):
                argv = base + ((option, value) if form == "space" else (f"{option}={value}",))
                cases.append(Case(f"cli-{base[0]}-{option}-{value}-{form}", argv, files, (option.lstrip("-"), value)))
    unwritable = "{tmp}/blocker/x"
    paths = [
        (plan + ("--out", unwritable + ".json"), "--out"),
        (plan + ("--out", "{tmp}"), "--out"),
        (plan + ("--out", "/proc/no/plan.json"), "--out"),
        (pipe + ("--out", unwritable + ".json"), "--out"),
        (pipe + ("--gantt", unwritable + ".png"), "--gantt"),
        (pipe + ("--gantt", "{tmp}/g.txt"), "--gantt"),
        (pipe + ("--gantt", "{tmp}/g"), "--gantt"),
        (simulate + ("--trace", unwritable + ".json"), "--trace"),
        (("compare", "{tmp}/recs", "--report", unwritable + ".md"), "--report"),
        (("compare", "{tmp}/recs", "--report", "{tmp}/r.txt"), "--report"),
        (("compare", "{tmp}/none"), "none"),
        (("batch", "{tmp}/j.yaml", "--out", unwritable), "--out"),
        (("plan", "--cluster", "{tmp}/none.yaml"), "none.yaml"),
        (("plan", "--planner", "magic"), "magic"),
        (pipe[:-4] + ("--planner", "magic"), "magic"),
        (pipe[:-2] + ("--schedule", "magic"), "magic"),
        (("plan", "--executor"), "--executor"),
        (("plan", "--colour", "red"), "--colour"),
        (("frobnicate",), "frobnicate"),
        (("batch", "{tmp}/j.yaml", "--out", "{tmp}/out", "--executor", "slurm"), "slurm"),
    ]
    files_with_blocker = dict(files, blocker="I am a file")
    for argv, fragment in paths:
        cases.append(Case(f"cli-path-{' '.join(argv)}", argv, files_with_blocker, (fragment,)))
    return cases


# ---------------------------------------------------------------------------------------------
# Model files: Hugging Face config.json (mutations of the shipped configs) and graph files
HF_CONFIGS = Path(__file__).resolve().parents[1] / "data" / "hf-configs"
HF_SHAPE_KEYS = ("n_layer", "n_embd", "n_head", "vocab_size", "n_positions", "num_hidden_layers", "hidden_size",
                 "num_attention_heads", "intermediate_size", "max_position_embeddings", "num_key_value_heads",
                 "d_model", "d_ff", "num_layers", "num_heads", "d_kv")


def hf_cases() -> list[Case]:
    cases = []
    for name in ("gpt2", "llama-2-7b", "bert-base-uncased", "t5-small"):
        path = HF_CONFIGS / f"{name}.json"
        if not path.is_file():
            continue  # the importer's data is not in this checkout
        config = json.loads(path.read_text())
        argv = ("plan", "--model", "{tmp}/config.json", "--planner", "greedy")
        for key in [k for k in HF_SHAPE_KEYS if k in config]:
            values = (("zero", 0), ("negative", -4), ("text", "x"), ("null", None), ("float", 2.5), ("bool", True),
                      ("huge", 10**30))
            for label, value in values if name == "gpt2" else values[::3]:  # every kind once, on gpt2
                data = dict(config, **{key: value})
                cases.append(Case(f"hf-{name}-{key}-{label}", argv, {"config.json": json.dumps(data)},
                                  ("config.json", key)))
        for label, change in (("model-type-unknown", {"model_type": "colour-net"}),
                              ("model-type-number", {"model_type": 5}), ("model-type-list", {"model_type": [name]}),
                              ("model-type-mapping", {"model_type": {"name": name}}), ("model-type-bool", {"model_type": True})):
            cases.append(Case(f"hf-{name}-{label}", argv, {"config.json": json.dumps(dict(config, **change))},
                              ("config.json", "model_type")))
        for spec, fragment in (("batch=0", "batch"), ("layers=-1", "layers"), ("nope=1", "nope"),
                               ("batch=99999999999999999999999", "batch"), ("seq=abc", "seq")):
            cases.append(Case(f"hf-{name}-option-{spec}", ("plan", "--model", "{tmp}/config.json:" + spec),
                              {"config.json": json.dumps(config)}, ("config.json", fragment)))
    deepseek = HF_CONFIGS / "deepseek-v3.json"
    if deepseek.is_file():  # the expert-routing keys of a mixture of experts, planned by `hybrid`
        config = json.loads(deepseek.read_text())
        argv = ("hybrid", "--model", "{tmp}/config.json:seq=512,layers=4", "--cluster", "h100-4x8-ib", "--devices", "8",
                "--batch", "16")
        for key, value in (("n_group", 0), ("n_group", "8"), ("topk_group", -1), ("topk_group", 9), ("n_group", 7),
                           ("num_experts_per_tok", 300), ("n_routed_experts", 0)):
            cases.append(Case(f"hf-deepseek-v3-{key}-{value}", argv, {"config.json": json.dumps(dict(config, **{key: value}))},
                              ("config.json",)))
    gpt2 = HF_CONFIGS / "gpt2.json"
    if gpt2.is_file():
        cases.append(Case("hf-duplicate-key", ("plan", "--model", "{tmp}/config.json"),
                          {"config.json": gpt2.read_text().rstrip().rstrip("}") + ', "n_layer": 2}'},
                          ("config.json", "duplicate key 'n_layer'")))
    for variant, content in raw_file_variants('{"model_type": "gpt2"}', json_like=True).items():
        cases.append(Case(f"hf-file-{variant}", ("plan", "--model", "hf:{tmp}/config.json"), {"config.json": content},
                          ("config.json",)))
    return cases


GRAPH_FILE = {"format": "solver-plan-graph", "version": 1, "name": "tiny",
              "operators": [{"name": "x", "type": "Input", "attrs": {"shape": [32, 64]}},
                            {"name": "fc", "type": "Linear", "inputs": ["x"], "attrs": {"in_features": 64, "out_features": 10}},
                            {"name": "loss", "type": "SoftmaxCrossEntropy", "inputs": ["fc"]}]}


def yaml_dump(data) -> str:
    import yaml
    return yaml.safe_dump(data, sort_keys=False)


def graph_file_cases() -> list[Case]:
    argv = ("plan", "--model", "{tmp}/g.json", "--planner", "greedy")

    def edit(change) -> str:
        data = copy.deepcopy(GRAPH_FILE)
        change(data)
        return json.dumps(data)

    ops = lambda d: d["operators"]  # noqa: E731
    edits = {
        "version-2": (lambda d: d.update(version=2), ("version",)),
        "version-string": (lambda d: d.update(version="1"), ("version",)),
        "version-missing": (lambda d: d.pop("version"), ("version",)),
        "operators-missing": (lambda d: d.pop("operators"), ("operators",)),
        "operators-empty": (lambda d: d.update(operators=[]), ("operators",)),
        "operators-mapping": (lambda d: d.update(operators={}), ("operators",)),
        "unknown-top-key": (lambda d: d.update(colour="red"), ("colour",)),
        "op-scalar": (lambda d: ops(d).__setitem__(1, 5), ("g.json",)),
        "op-type-unknown": (lambda d: ops(d)[1].update(type="Magic"), ("Magic",)),
        "op-name-missing": (lambda d: ops(d)[1].pop("name"), ("name",)),
        "op-name-duplicate": (lambda d: ops(d)[1].update(name="x"), ("x",)),
        "op-input-unknown": (lambda d: ops(d)[1].update(inputs=["nope"]), ("nope",)),
        "op-input-later": (lambda d: ops(d)[1].update(inputs=["loss"]), ("loss",)),
        "op-unknown-key": (lambda d: ops(d)[1].update(colour=1), ("colour",)),
        "shape-negative": (lambda d: ops(d)[0]["attrs"].update(shape=[32, -64]), ("x",)),
        "shape-zero": (lambda d: ops(d)[0]["attrs"].update(shape=[0, 64]), ("x",)),
        "shape-text": (lambda d: ops(d)[0]["attrs"].update(shape="big"), ("x",)),
        "shape-huge": (lambda d: ops(d)[0]["attrs"].update(shape=[2**40, 2**40]), ("x",)),
        "linear-mismatch": (lambda d: ops(d)[1]["attrs"].update(in_features=65), ("fc",)),
        "linear-missing-attr": (lambda d: ops(d)[1]["attrs"].pop("out_features"), ("out_features",)),
        "linear-negative": (lambda d: ops(d)[1]["attrs"].update(out_features=-10), ("fc",)),
        "outputs-wrong": (lambda d: ops(d)[1].update(outputs=[[32, 11]]), ("fc",)),
        "dtype-bytes-zero": (lambda d: d.update(dtype_bytes=0), ("dtype_bytes",)),
    }
    cases = [Case(f"graph-{key}", argv, {"g.json": edit(change)}, ("g.json",) + expect)
             for key, (change, expect) in edits.items()]
    cases.append(Case("graph-yaml-duplicate-key", ("plan", "--model", "{tmp}/g.yaml"),
                      {"g.yaml": "name: a\n" + yaml_dump(GRAPH_FILE)}, ("g.yaml", "duplicate key 'name'")))
    yaml_text = json.dumps(GRAPH_FILE)  # JSON is YAML: the same document as g.yaml
    for variant, content in raw_file_variants(yaml_text).items():
        cases.append(Case(f"graph-yaml-{variant}", ("plan", "--model", "{tmp}/g.yaml"), {"g.yaml": content},
                          ("g.yaml",)))
    return cases


# ---------------------------------------------------------------------------------------------
# Commands added by other packages (hybrid, export, calibrate): covered when they exist
def _commands() -> set[str]:
    from solver_plan.cli import build_parser
    parser = build_parser()
    return {name for action in parser._subparsers._group_actions for name in action.choices}


def _subparser(name: str):
    from solver_plan.cli import build_parser
    parser = build_parser()
    return next(action.choices[name] for action in parser._subparsers._group_actions)


def other_command_cases() -> list[Case]:
    commands = _commands()
    cases = []
    plan_file = {"p.json": json.dumps({"schema_version": 1, "operators": []}), "blocker": "a file"}
    if "hybrid" in commands:
        hybrid = ("hybrid", "--model", "gpt3-175B:layers=4", "--cluster", "v100x8-nvlink", "--batch", "16")
        for option, value in (("--batch", "0"), ("--batch", "-1"), ("--batch", "abc"), ("--devices", "0"),
                              ("--devices", "-8"), ("--memory-limit", "-16GB"), ("--memory-limit", "lots"),
                              ("--fix", "nonsense"), ("--fix", "dp=0"), ("--fix", "dp=abc"), ("--fix", "colour=3"),
                              ("--time-limit", "0"), ("--time-limit", "-1"), ("--time-limit", "nan"),
                              ("--compute-scale", "-1"), ("--compute-scale", "nan"), ("--planner", "magic"),
                              ("--out", "{tmp}/blocker/x.json"), ("--model", "resnet51"), ("--cluster", "{tmp}/none.yaml")):
            expect = value if option in ("--model", "--cluster", "--out") else option.lstrip("-")
            cases.append(Case(f"hybrid-{option}-{value}", hybrid + (option, value), plan_file,
                              (expect.replace("{tmp}/", ""),)))
        # training precision: unknown, and one the device has no units for (bf16 on a P100)
        cases.append(Case("hybrid-precision-fp64", hybrid + ("--precision", "fp64"), plan_file, ("precision",)))
        p100 = tuple("p100-4x4" if a == "v100x8-nvlink" else a for a in hybrid)
        cases.append(Case("hybrid-precision-bf16-p100", p100 + ("--precision", "bf16"), plan_file, ("precision",)))
        # a mixture of experts: pins only its search takes, and a pair of them that cannot go together
        moe = ("hybrid", "--model", f"{HF_CONFIGS / 'qwen1.5-moe-a2.7b.json'}:seq=512,layers=2", "--cluster", "h100-4x8-ib", "--devices", "8",
               "--batch", "16")
        for value, expect in (("dispatcher=nccl", "nccl"), ("dispatcher=deepep,capacity=1.25", "capacity=1.25"),
                              ("capacity=0.5", "--fix capacity")):
            cases.append(Case(f"hybrid-moe-fix-{value}", moe + ("--fix", value), {}, (expect,)))
    plan_options = {opt for action in _subparser("plan")._actions for opt in action.option_strings}
    if "--option" in plan_options:  # planner options on the command line
        plan = ("plan", "--model", "mlp:layers=2,hidden=64,batch=8", "--planner", "mcmc")
        for value, expect in (("nope=1", "nope"), ("noequals", "noequals"), ("iterations=-5", "iterations"),
                              ("iterations=abc", "abc"), ("=3", "=3"), ("objective=colour", "colour")):
            cases.append(Case(f"option-{value}", plan + ("--option", value), {}, (expect,)))
    if "export" in commands:
        for target in ("megatron", "dtensor"):
            argv = ("export", "--target", target) + (("--model", "lenet") if target == "dtensor" else ()) + ("{tmp}/p.json",)
            for variant, content in raw_file_variants('{"schema_version": 1}', json_like=True).items():
                cases.append(Case(f"export-{target}-file-{variant}", argv, {"p.json": content}, ("p.json",)))
            cases.append(Case(f"export-{target}-no-such-file", argv[:-1] + ("{tmp}/none.json",), {}, ("none.json",)))
        cases.append(Case("export-target-unknown", ("export", "--target", "slurm", "{tmp}/p.json"), plan_file, ("slurm",)))
    if "calibrate" in commands:
        argv = ("calibrate", "--csv", "{tmp}/m.csv", "--out", "{tmp}/o.yaml")
        for variant, content in raw_file_variants("op,shape,dtype,time_us\n").items():
            if variant in ("latin1", "nul-byte", "truncated-utf8", "binary", "utf16-bom", "utf16-no-bom", "empty", "blank"):
                cases.append(Case(f"calibrate-csv-{variant}", argv, {"m.csv": content}, ("m.csv",)))
        cases.append(Case("calibrate-csv-bad-header", argv, {"m.csv": "a,b\n1,2\n"}, ("m.csv",)))
        cases.append(Case("calibrate-out-unwritable", ("calibrate", "--profile", "all", "--out", "{tmp}/blocker/o.yaml"),
                          plan_file, ("--out",)))
        cases.append(Case("calibrate-cluster-unknown", argv[:1] + ("--cluster", "tpu-pod") + argv[1:],
                          {"m.csv": "op,shape,dtype,time_us\n"}, ("tpu-pod",)))
    return cases


def corpus_cases() -> list[Case]:
    """Files dropped into tests/bad_inputs/<folder>/ (see CORPUS_COMMANDS)."""
    cases = []
    for folder, command in CORPUS_COMMANDS.items():
        for path in sorted((CORPUS / folder).glob("*")) if (CORPUS / folder).is_dir() else []:
            if path.name.startswith(".") or path.name == "README.md":
                continue
            argv = tuple(part.replace("{file}", "{tmp}/" + path.name) for part in command)
            cases.append(Case(f"corpus-{folder}-{path.name}", argv, {path.name: path.read_bytes()}, (path.name,)))
    return cases


# ---------------------------------------------------------------------------------------------
# Files that are not regular files, as every file input: a FIFO would block, /dev/zero never ends,
# /proc files claim 0 bytes; each is refused by name before a byte is read
SPECIAL_FILES = {"fifo": Special("fifo"), "dev-zero": Special("link:/dev/zero"),
                 "dev-urandom": Special("link:/dev/urandom"), "proc": Special("link:/proc/self/status"),
                 "folder": Special("folder")}
LONG_NAME = "n" * 300  # longer than any file system's name limit (255 bytes)
FILE_INPUTS = {  # what reads the file -> (argv with {f}, the file's name)
    "check": (("check", "{f}"), "c.yaml"),
    "plan-cluster": (("plan", "--cluster", "{f}", "--model", "lenet", "--planner", "greedy"), "c.yaml"),
    "batch": (("batch", "{f}", "--out", "{tmp}/out"), "j.yaml"),
    "simulate-plan": (("simulate", "--plan", "{f}", "--model", PLAN_MODEL, "--cluster", PLAN_CLUSTER), "p.json"),
    "export-plan": (("export", "--target", "megatron", "{f}"), "p.json"),
    "pipeline-blocks": (("pipeline", "--model", "{f}", "-P", "2"), "b.json"),
    "graph-json": (("plan", "--model", "{f}", "--planner", "greedy"), "g.json"),
    "graph-yaml": (("plan", "--model", "{f}", "--planner", "greedy"), "g.yaml"),
    "hf-config": (("plan", "--model", "hf:{f}", "--planner", "greedy"), "config.json"),
    "profile": (("plan", "--model", "{f}", "--planner", "greedy"), "g.txt"),
    "calibrate-csv": (("calibrate", "--csv", "{f}", "--out", "{tmp}/o.yaml"), "m.csv"),
    "onnx-model": (("plan", "--model", "{f}", "--planner", "greedy"), "m.onnx"),
}


def special_file_cases() -> list[Case]:
    cases = []
    for entry, (argv, name) in FILE_INPUTS.items():
        if argv[0] not in _commands():
            continue
        for kind, special in SPECIAL_FILES.items():
            cases.append(Case(f"special-{entry}-{kind}", tuple(a.replace("{f}", "{tmp}/" + name) for a in argv),
                              {name: special}, (name,)))
        long_name = LONG_NAME + Path(name).suffix
        cases.append(Case(f"special-{entry}-long-name", tuple(a.replace("{f}", "{tmp}/" + long_name) for a in argv),
                          {}, (LONG_NAME[:20],)))
    if "compare" in _commands():  # a FIFO among the records: invalid, not a hang
        cases.append(Case("special-compare-fifo-record", ("compare", "{tmp}/recs"), {"recs/x.json": Special("fifo")},
                          ("recs",)))
    plan = ("plan", "--model", "lenet", "--planner", "greedy")
    for option in ("--model", "--cluster"):
        for command in (plan, ("pipeline", "--model", "lenet", "-P", "2"),
                        ("hybrid", "--model", "gpt2", "--cluster", "v100x8-nvlink", "--batch", "8")):
            cases.append(Case(f"empty-{command[0]}-{option}", command + (option, ""), {}, ("empty",)))
    for option, suffix in (("--out", ".json"), ("--out", "/x.json")):
        cases.append(Case(f"long-name-plan-{option}{suffix}", plan + (option, "{tmp}/" + LONG_NAME + suffix), {},
                          (option, "255")))
    cases.append(Case("missing-output-folder", plan + ("--out", "{tmp}/no/such/p.json"), {}, ("--out", "does not exist")))
    cases.append(Case("missing-records-parent", ("batch", "{tmp}/j.yaml", "--out", "{tmp}/no/such/records"),
                      {"j.yaml": _job_text()}, ("--out", "does not exist")))
    return cases


# ---------------------------------------------------------------------------------------------
# Graph-file attributes: every attribute of every type, mutated to each kind of wrong value
GRAPH_ALL_TYPES = {"format": "solver-plan-graph", "version": 1, "name": "every-type", "operators": [
    {"name": "img", "type": "Input", "attrs": {"shape": [2, 3, 8, 8]}},
    {"name": "conv", "type": "Conv2d", "inputs": ["img"], "attrs": {
        "in_channels": 3, "out_channels": 4, "kernel": [3, 3], "stride": [1, 1], "padding": [1, 1], "groups": 1,
        "bias": True}},
    {"name": "norm", "type": "BatchNorm", "inputs": ["conv"]},
    {"name": "pool", "type": "Pool2d", "inputs": ["norm"], "attrs": {
        "kind": "max", "global_pool": False, "kernel": [2, 2], "stride": [2, 2], "padding": [0, 0]}},
    {"name": "flat", "type": "Reshape", "inputs": ["pool"], "attrs": {"shape": [2, 64]}},
    {"name": "fc", "type": "Linear", "inputs": ["flat"], "attrs": {"in_features": 64, "out_features": 16, "bias": True}},
    {"name": "act", "type": "Unary", "inputs": ["fc"], "attrs": {"kind": "gelu"}},
    {"name": "halves", "type": "Split", "inputs": ["act"], "attrs": {"axis": 1, "sizes": [8, 8]}},
    {"name": "both", "type": "Concat", "inputs": ["halves:0", "halves:1"], "attrs": {"axis": 1}},
    {"name": "mix", "type": "Binary", "inputs": ["both", "act"], "attrs": {"kind": "add"}},
    {"name": "seq", "type": "Reshape", "inputs": ["mix"], "attrs": {"shape": [2, 4, 4]}},
    {"name": "swap", "type": "Transpose", "inputs": ["seq"], "attrs": {"perm": [0, 2, 1]}},
    {"name": "ln", "type": "LayerNorm", "inputs": ["swap"], "attrs": {"rms": False}},
    {"name": "att", "type": "Attention", "inputs": ["ln", "ln", "ln"], "attrs": {
        "heads": 2, "kv_heads": 2, "scores": "fused", "dropout": False}},
    {"name": "rnn", "type": "LSTM", "inputs": ["att"], "attrs": {"input_size": 4, "hidden_size": 4, "reverse": False}},
    {"name": "soft", "type": "Softmax", "inputs": ["rnn"], "attrs": {"axis": -1}},
    {"name": "opaque", "type": "Profiled", "inputs": ["soft"], "attrs": {
        "output_shapes": [[2, 16]], "flops": 100.0, "params": 10, "description": "a measured layer"}},
    {"name": "ids", "type": "Input", "attrs": {"shape": [2, 16]}},
    {"name": "emb", "type": "Embedding", "inputs": ["ids"], "attrs": {"num_embeddings": 10, "embedding_dim": 16}},
    {"name": "head", "type": "Linear", "inputs": ["opaque"], "attrs": {"in_features": 16, "out_features": 10,
                                                                       "bias": False, "tied_to": "emb"}},
    {"name": "loss", "type": "SoftmaxCrossEntropy", "inputs": ["head"]},
]}
# wrong values by what an attribute holds (the value it has decides which apply)
_BAD_INT = [0, -1, 2.5, True, "4", None, [4]]
_BAD_BOOL = ["no", "yes", 0, 1, None, "false"]
_BAD_LIST = [[], "big", 5, [0, 1], [-1, 2], [1.5, 2], [True, 1], None]
_BAD_TEXT = [5, None, ["a"], {"a": 1}]


_VALID_FOR_KEY = {("padding", "[0, 1]"), ("axis", "0"), ("params", "0")}  # wrong elsewhere, valid here


def _bad_values(value) -> list:
    if isinstance(value, bool):
        return _BAD_BOOL
    if isinstance(value, int):
        return [v for v in _BAD_INT if not (value < 0 and v == -1)] if value >= 0 else [2.5, True, "x", None]
    if isinstance(value, float):
        return [-1.0, "x", None, True, float("inf")]
    if isinstance(value, list):
        return _BAD_LIST
    return _BAD_TEXT + ["median", "pow", ""]


def graph_attribute_cases() -> list[Case]:
    argv = ("plan", "--model", "{tmp}/g.json", "--planner", "greedy")
    cases = []
    for index, op in enumerate(GRAPH_ALL_TYPES["operators"]):
        attrs = op.get("attrs", {})
        for key, value in attrs.items():
            for bad in _bad_values(value):
                if key in ("axis",) and op["type"] == "Softmax" and isinstance(bad, int) and not isinstance(bad, bool):
                    continue  # any integer axis is an axis (-1: the last)
                if key == "description" and isinstance(bad, str) or (key, repr(bad)) in _VALID_FOR_KEY:
                    continue
                data = copy.deepcopy(GRAPH_ALL_TYPES)
                data["operators"][index]["attrs"][key] = bad
                text = json.dumps(data, allow_nan=True).replace("Infinity", "1e999")
                cases.append(Case(f"graph-attr-{op['name']}-{key}={bad!r}", argv, {"g.json": text},
                                  ("g.json", op["name"])))
        data = copy.deepcopy(GRAPH_ALL_TYPES)
        data["operators"][index].setdefault("attrs", {})["colour"] = "red"
        cases.append(Case(f"graph-attr-{op['type']}-{op['name']}-unknown", argv, {"g.json": json.dumps(data)},
                          ("g.json", op["name"], "colour")))
    head = next(i for i, op in enumerate(GRAPH_ALL_TYPES["operators"]) if op["name"] == "head")
    for owner, fragment in (("nope", "nope"), ("head", "head"), ("fc", "10 x 16"), ("act", "Unary"), ("", "tied_to")):
        data = copy.deepcopy(GRAPH_ALL_TYPES)
        data["operators"][head]["attrs"]["tied_to"] = owner
        cases.append(Case(f"graph-tied-to-{owner or 'empty'}", argv, {"g.json": json.dumps(data)}, ("g.json", fragment)))
    return cases


# ---------------------------------------------------------------------------------------------
# Zoo numbers in other scripts' digits, and transformer widths that do not fit their heads
def zoo_shape_cases() -> list[Case]:
    from solver_plan.graph.zoo import model_names, model_options

    cases = []
    for name in model_names():
        options = model_options(name)
        ints = [key for key, value in options.items() if isinstance(value, int) and not isinstance(value, bool)]
        for key in ints[:1]:
            for digits in ("\uff11", "\u0661", "\u096a"):  # full-width 1, Arabic-Indic 1, Devanagari 4
                cases.append(Case(f"zoo-{name}-{key}-digit-{ord(digits):x}",
                                  ("plan", "--model", f"{name}:{key}={digits}", "--planner", "greedy"), {}, (key,)))
        if {"hidden", "heads", "head_dim"} <= set(options) and options["hidden"] == options["heads"] * options["head_dim"]:
            for spec in (f"{name}:heads={options['heads'] + 1}", f"{name}:hidden=3", f"{name}:hidden={options['hidden'] * 2 + 1}"):
                cases.append(Case(f"zoo-width-{spec}", ("plan", "--model", spec, "--planner", "greedy"), {},
                                  (name, "head_dim")))
    for digits in ("\uff11\uff16", "\u0661\u0666"):  # sizes in other scripts' digits, plain and in YAML
        cases.append(Case(f"units-memory-limit-{ord(digits[0]):x}", ("plan", "--model", "lenet", "--memory-limit", digits),
                          {}, ("--memory-limit",)))
        text = render_yaml(_set(CLUSTER, "device.memory", f"'{digits}'")) + "\n"
        cases.append(Case(f"units-cluster-memory-{ord(digits[0]):x}", ("check", "{tmp}/c.yaml"), {"c.yaml": text},
                          ("c.yaml", "memory")))
    cases.append(Case("zoo-seed-negative", ("plan", "--model", "lenet", "--planner", "greedy", "--seed", "-1"), {},
                      ("--seed",)))
    return cases


# ---------------------------------------------------------------------------------------------
# Job files: names, time limits past what waits can hold, hybrid options checked when the jobs load
HYBRID_JOB = ("jobs:\n  - name: h\n    kind: hybrid\n    models: ['{model}']\n    clusters: [v100x8-nvlink]\n"
              "    planners: [{{name: hybrid, options: {options}}}]\n    time_limit: 5\n")


def job_limit_cases() -> list[Case]:
    argv = ("batch", "{tmp}/j.yaml", "--out", "{tmp}/out")
    cases = []
    for label, name in (("empty", '""'), ("blank", '"  "'), ("parent", '"../../evil"'), ("slash", '"a/b"'),
                        ("dot", '"."'), ("dotdot", '".."'), ("backslash", '"a\\\\b"'), ("tab", '"a\\tb"'),
                        ("newline", '"a\\nb"'), ("long", "x" * 201)):
        text = _job_text(("  - name: small", f"  - name: {name}"))
        cases.append(Case(f"jobs-name-{label}", argv, {"j.yaml": text}, ("j.yaml", "name")))
    for value in ("1e30", "1e8", "100000000s", "1e308"):
        cases.append(Case(f"jobs-time-limit-{value}", argv,
                          {"j.yaml": _job_text(("    time_limit: 5", f"    time_limit: {value}"))}, ("j.yaml", "time_limit")))
        cases.append(Case(f"jobs-defaults-time-limit-{value}", argv,
                          {"j.yaml": _job_text(("  time_limit: 5", f"  time_limit: {value}"))}, ("j.yaml", "time_limit")))
    if "hybrid" in _commands():
        model = "gpt3-175B:layers=4"
        for options, fragment in (("{batch: 0}", "batch"), ("{batch: -8}", "batch"), ("{batch: 1e308}", "batch"),
                                  ("{batch: 2.5}", "batch"), ("{batch: abc}", "batch"), ("{batch: true}", "batch"),
                                  ("{batch: 1000000000000}", "batch"), ("{}", "batch"),
                                  ("{batch: 8, fix: 'tp=abc'}", "fix"), ("{batch: 8, fix: 'colour=3'}", "fix"),
                                  ("{batch: 8, fix: 5}", "fix")):
            cases.append(Case(f"jobs-hybrid-options-{options}", argv,
                              {"j.yaml": HYBRID_JOB.format(model=model, options=options)}, ("j.yaml", fragment)))
        for cnn in ("resnet50", "lenet", "mlp", "bert-base", "t5-small"):
            cases.append(Case(f"jobs-hybrid-model-{cnn}", argv,
                              {"j.yaml": HYBRID_JOB.format(model=cnn, options="{batch: 8}")}, ("j.yaml", cnn)))
        hybrid = ("hybrid", "--model", "gpt2", "--cluster", "v100x8-nvlink", "--time-limit", "4")
        for batch in ("1000000000000", "16777217"):
            cases.append(Case(f"hybrid-batch-{batch}", hybrid + ("--batch", batch), {}, ("--batch", batch)))
    return cases


# ---------------------------------------------------------------------------------------------
# Every number option of every command, in other scripts' digits (int('４') is 4 in Python)
def cli_number_digit_cases() -> list[Case]:
    cases = []
    for command in sorted(_commands()):
        for action in _subparser(command)._actions:
            if action.type not in (int, float) or not action.option_strings:
                continue
            option = action.option_strings[-1] if action.option_strings[-1].startswith("--") else action.option_strings[0]
            for digits in ("\uff14", "\u0664"):  # full-width 4, Arabic-Indic 4
                cases.append(Case(f"cli-{command}-{option}-digit-{ord(digits):x}", (command, option, digits), {},
                                  (option,)))
    return cases


# ---------------------------------------------------------------------------------------------
# Options spelled the same in every subcommand (issue 21): the new spellings refuse what the old
# ones refused, naming the option as typed; old and new spellings together are refused too.
def unified_option_cases() -> list[Case]:
    pipe = ("pipeline", "--model", "lenet", "--planner", "pipedream", "--schedule", "1f1b*")
    hybrid = ("hybrid", "--model", "gpt3-175B:layers=4", "--cluster", "v100x8-nvlink", "--batch", "16")
    plan = ("plan", "--model", "mlp:layers=2,hidden=64,batch=8", "--planner", "greedy")
    numbers = [
        (pipe, "--devices", ["0", "-1", "abc", "100000"]),
        (pipe + ("--devices", "2"), "--memory-limit", ["-16GB", "abc", "0", "none"]),
        (pipe + ("--devices", "2"), "--seed", ["abc", "-1", "1.5"]),
        (pipe + ("--devices", "2"), "--precision", ["fp64", "half"]),
        (pipe + ("--devices", "2"), "--option", ["noequals", "=3"]),  # pipeline planners declare no option names
        (hybrid, "--block-solver", ["magic"]),
        (hybrid, "--seed", ["abc", "-1"]),
        (hybrid, "--precision", ["fp64"]),
        (plan, "--precision", ["fp64", "int8"]),
        (("simulate", "{tmp}/p.json", "--model", PLAN_MODEL, "--cluster", PLAN_CLUSTER), "--devices", ["0", "abc"]),
    ]
    files = {"p.json": json.dumps({"schema_version": 1, "operators": []})}
    cases = []
    for base, option, values in numbers:
        for value in values:
            expect = value.split("=")[0] if option == "--option" and value != "=3" else value
            cases.append(Case(f"unified-{base[0]}-{option}-{value}", base + (f"{option}={value}",), files,
                              (option.lstrip("-"), expect)))
    cases.append(Case("unified-pipeline-no-devices", pipe, {}, ("--devices",)))
    cases.append(Case("unified-simulate-no-plan", ("simulate",), {}, ("PLAN",)))
    cases.append(Case("unified-simulate-plan-twice", ("simulate", "{tmp}/p.json", "--plan", "{tmp}/p.json"), files,
                      ("--plan",)))
    cases.append(Case("unified-pipeline-old-spelling-named", pipe + ("--processors", "0"), {}, ("--processors",)))
    cases.append(Case("unified-hybrid-old-spelling-named", hybrid + ("--planner", "magic"), {}, ("--planner", "magic")))
    return cases


GENERATORS = (cluster_cases, model_cases, profile_cases, blocks_cases, job_cases, cli_cases, hf_cases,
              graph_file_cases, other_command_cases, corpus_cases, special_file_cases, graph_attribute_cases,
              zoo_shape_cases, job_limit_cases, cli_number_digit_cases, unified_option_cases)
