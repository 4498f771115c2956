"""Public measurements of training steps (corpus.yaml), their models and a loader."""
