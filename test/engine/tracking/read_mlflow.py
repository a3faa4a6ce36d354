#!/usr/bin/env python3
"""What an MLflow tracking server holds of an experiment, read through MLflow's own Python client (MlflowClient):
each run's name, status, params, every metric's full history (get_metric_history), its artifacts' paths, with
run.json's content, and its parent and Credit Lens tags. usage: read_mlflow.py <tracking_uri> <experiment name>   prints JSON: {"experiment_id", "runs": [...]}"""
import json
import sys
import tempfile

from mlflow.tracking import MlflowClient


def main(uri: str, name: str) -> dict:
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(name)
    if exp is None:
        return {"experiment_id": None, "runs": []}
    runs = []
    for run in client.search_runs([exp.experiment_id]):
        rid = run.info.run_id
        metrics = {
            key: sorted([m.step, m.value] for m in client.get_metric_history(rid, key)) for key in run.data.metrics
        }
        artifacts = [a.path for a in client.list_artifacts(rid)]
        run_json = None
        if "run.json" in artifacts:
            with tempfile.TemporaryDirectory() as d:
                run_json = json.loads(open(client.download_artifacts(rid, "run.json", d)).read())
        runs.append(
            {
                "run_id": rid,
                "name": run.info.run_name,
                "status": run.info.status,
                "params": run.data.params,
                "metrics": metrics,
                "artifacts": artifacts,
                "run_json": run_json,
                "tags": {k: v for k, v in run.data.tags.items() if k == "mlflow.parentRunId" or k.startswith("credit_lens.")},
            }
        )
    return {"experiment_id": exp.experiment_id, "runs": runs}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
