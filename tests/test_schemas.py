"""JSON Schemas in docs/schemas/ checked against real outputs and every shipped input file.

Why jsonschema and not pydantic: the schemas are for people and tools outside this package (a
runtime reading a plan, an editor checking a cluster YAML), so they are language-neutral files,
published and versioned in docs/; jsonschema validates documents against exactly those files.
Pydantic would generate schemas from a second set of Python classes beside the frozen dataclasses
and the strict YAML readers, which keep the one-line errors naming file and key."""
from __future__ import annotations

import json
import pytest
import yaml

jsonschema = pytest.importorskip("jsonschema")

from solver_plan.resources import REPO_ROOT, cluster_presets_dir, jobs_dir  # noqa: E402

SCHEMAS = REPO_ROOT / "docs" / "schemas"


def validator(name: str):
    schema = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def errors(name: str, document) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator(name).iter_errors(document)]


def enveloped(d: dict, kind: str) -> dict:
    """Every result JSON carries the envelope (issue 21): kind, schema_version and the rest, first."""
    from solver_plan.result import ENVELOPE_KEYS
    assert set(ENVELOPE_KEYS) <= set(d)
    assert (d["kind"], d["schema_version"]) == (kind, 1)
    return d


def test_every_schema_is_valid_and_versioned():
    names = sorted(p.name for p in SCHEMAS.glob("*.schema.json"))
    assert {"plan.v1.schema.json", "pipeline.v1.schema.json", "hybrid.v1.schema.json", "cluster.v1.schema.json",
            "jobs.v1.schema.json", "graph-file.v1.schema.json", "result-envelope.v1.schema.json",
            "moe-hybrid.v1.schema.json", "batch-record.v1.schema.json"} <= set(names)
    for name in names:
        schema = json.loads((SCHEMAS / name).read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$id"].endswith(name) and ".v" in name


def test_plan_output():
    from solver_plan.api import plan
    d = plan("mlp:layers=2,hidden=128,batch=32", "v100x8-nvlink", "greedy", devices=4, memory_limit=None).to_dict()
    assert errors("plan.v1.schema.json", enveloped(d, "config")) == []
    d["status"] = "DONE"
    assert errors("plan.v1.schema.json", d)


def test_every_result_schema_includes_the_envelope():
    """A result JSON without an envelope key, or with a malformed one, fails its own schema."""
    d = json.loads((REPO_ROOT / "tests" / "fixtures" / "plans" / "operators-mlp.json").read_text())
    assert any("'kind' is a required property" in e for e in errors("plan.v1.schema.json", d))  # before the envelope
    envelope = json.loads((SCHEMAS / "result-envelope.v1.schema.json").read_text())
    for name in ("plan", "pipeline", "hybrid", "moe-hybrid", "batch-record"):
        schema = json.loads((SCHEMAS / f"{name}.v1.schema.json").read_text())
        assert {"$ref": "result-envelope.v1.schema.json"} in schema["allOf"]
        # bundled (self-contained files for tools outside): the copy is the envelope schema itself
        assert schema["$defs"]["result-envelope"] == {k: v for k, v in envelope.items() if k != "$schema"}
        assert {"kind", "schema_version"} <= set(schema["required"])
    bad = {"kind": "config", "schema_version": 1, "status": "OPTIMAL", "bound": None, "gap": None, "runtime_s": 1.0,
           "notes": [], "solver_failures": [], "objective": {"name": "sum", "value": 1.0, "unit": "s"}}
    assert any("'meaning' is a required property" in e for e in errors("result-envelope.v1.schema.json", bad))
    from solver_plan.api import plan
    d = plan("mlp:layers=2,hidden=64,batch=8", "v100x8-nvlink", "greedy", devices=2, memory_limit=None).to_dict()
    assert errors("plan.v1.schema.json", d) == []
    d["objective"] = bad["objective"]  # only the bundled envelope knows objective.meaning: it is applied
    assert any("'meaning' is a required property" in e for e in errors("plan.v1.schema.json", d))


def test_pipeline_output():
    from solver_plan.api import pipeline
    d = pipeline("resnet50:batch=8", "v100x8-nvlink", 2, "pipedream", "1f1b*", time_limit=10).to_dict()
    assert d["stages"] and d["operations"]
    assert errors("pipeline.v1.schema.json", enveloped(d, "pipeline")) == []
    assert d["objective"]["name"] == "period" and d["objective"]["value"] == d["period_s"]


def test_hybrid_output_and_its_exports():
    from solver_plan.api import export_plan, hybrid
    d = hybrid("gpt2:layers=4,seq=128", "v100x8-nvlink", 16, time_limit=30).to_dict()
    assert errors("hybrid.v1.schema.json", enveloped(d, "hybrid")) == []
    p = d["parallelism"]
    assert p["dp"] * p["tp"] * p["pp"] == d["devices"]
    config = json.loads(export_plan(d, "deepspeed"))  # the exporters read this very dict
    assert config["solver_plan"]["global_batch"] == d["global_batch"]  # (AutoTP plans leave train_batch_size out)
    broken = dict(d, parallelism=dict(p, zero_stage=5))
    assert errors("hybrid.v1.schema.json", broken)


def test_moe_hybrid_output(tmp_path):
    from solver_plan.cli import main
    cfg = {"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
           "num_experts": 8, "num_experts_per_tok": 2, "num_hidden_layers": 4, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 256, "vocab_size": 1000,
           "tie_word_embeddings": False}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "moe.json"
    assert main(["hybrid", "--model", f"{tmp_path / 'config.json'}:seq=64", "--cluster", "h100-4x8-ib", "--devices",
                 "8", "--batch", "16", "--fix", "ep=4,etp=1", "--out", str(out)]) == 0
    d = json.loads(out.read_text())
    assert errors("moe-hybrid.v1.schema.json", enveloped(d, "moe-hybrid")) == []
    assert d["objective"] == {**d["objective"], "name": "step_time", "value": d["step_time_s"]}


def test_batch_record_output(tmp_path):
    """A real record of a config job (its plan a plan JSON) and of a failed one (no plan)."""
    from solver_plan.batch.job import Job
    from solver_plan.batch.kinds import outcome, run_job
    from solver_plan.batch.records import build_record
    from solver_plan.result import Status
    job = Job("schema", "config", "mlp:layers=2,hidden=128,batch=32", "v100x8-nvlink", "greedy", devices=4)
    record = build_record(job, run_job(job), 0.5)
    assert errors("batch-record.v1.schema.json", enveloped(record, "batch-record")) == []
    assert errors("plan.v1.schema.json", record["plan"]) == []
    assert record["objective"]["name"] == "sum" and record["objective"]["value"] == record["objective_s"]
    failed = build_record(job, outcome(Status.ERROR, None, None, None, None, "boom"), 0.1)
    assert errors("batch-record.v1.schema.json", failed) == [] and failed["notes"] == ["boom"]
    pipeline = Job("schema", "pipeline", "resnet50", "v100x8-nvlink", "pipedream", processors=2)
    assert build_record(pipeline, outcome(Status.FEASIBLE, 1.0, None, 0.1, None), 0.1)["objective"]["name"] == "period"


@pytest.mark.parametrize("path", sorted(cluster_presets_dir().glob("*.yaml")), ids=lambda p: p.stem)
def test_cluster_presets(path):
    assert errors("cluster.v1.schema.json", yaml.safe_load(path.read_text())) == []


def test_cluster_schema_and_loader_agree_on_an_unknown_key(tmp_path):
    from solver_plan.cluster import resolve_cluster
    from solver_plan.errors import InputError
    data = yaml.safe_load((cluster_presets_dir() / "v100x8-nvlink.yaml").read_text())
    data["device"]["memroy"] = "16GB"
    assert any("memroy" in e for e in errors("cluster.v1.schema.json", data))
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match="memroy"):
        resolve_cluster(str(path))


def test_job_schema_knows_every_setting():
    """A setting added to the job-file reader must be added to docs/schemas/jobs.v1.schema.json."""
    from solver_plan.batch.settings import SETTING_KEYS
    schema = json.loads((SCHEMAS / "jobs.v1.schema.json").read_text())
    assert set(schema["properties"]["defaults"]["properties"]) == set(SETTING_KEYS)


@pytest.mark.parametrize("path", sorted(jobs_dir().glob("*.yaml")), ids=lambda p: p.stem)
def test_job_files(path):
    assert errors("jobs.v1.schema.json", yaml.safe_load(path.read_text())) == []


def test_graph_file_round_trip(tmp_path):
    """Any graph written as a graph file validates and reads back with the same operators, FLOPs
    and parameters (zoo models and imported Hugging Face configs alike)."""
    from solver_plan.api import load_model
    from solver_plan.graph.importers.graph_file import graph_to_document
    for spec in ("resnet50:batch=2", "t5-small:layers=1", "data/hf-configs/mixtral-8x7b-v0.1.json:layers=1,seq=16"):
        graph = load_model(str(REPO_ROOT / spec) if spec.startswith("data/") else spec)
        doc = graph_to_document(graph)
        assert errors("graph-file.v1.schema.json", doc) == []
        for suffix, dump in ((".json", json.dumps), (".yaml", yaml.safe_dump)):
            path = tmp_path / f"g{suffix}"
            path.write_text(dump(doc))
            back = load_model(str(path))
            assert (len(back), back.total_flops, back.total_params) == (len(graph), graph.total_flops,
                                                                       graph.total_params)
            assert [op.name for op in back] == [op.name for op in graph]


def test_graph_file_example_in_docs(tmp_path):
    """The example of docs/graph-file.md is a valid graph file with the parameters it should have."""
    from solver_plan.api import load_model
    text = (REPO_ROOT / "docs" / "graph-file.md").read_text()
    example = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert errors("graph-file.v1.schema.json", yaml.safe_load(example)) == []
    path = tmp_path / "example.yaml"
    path.write_text(example)
    graph = load_model(str(path))
    assert graph.total_params == (784 * 256 + 256) + 128 * 10
    assert graph.op("mix").output.shape == (64, 128)
