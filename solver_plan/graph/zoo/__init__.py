"""Model zoo: parameterised graphs of well-known networks, built from specs like
"resnet50:batch=8,image=1000" or "gpt2:layers=4"."""
from solver_plan.graph.zoo.catalog import build_model, model_description, model_names, model_options

__all__ = ["build_model", "model_description", "model_names", "model_options"]
