#!/usr/bin/env python3
"""Writes N desired/live pairs made from the shared corpus' Deployment and StatefulSet pairs
(real API-server read-backs), each copy renamed: desired as block YAML, live as JSON the way
`kubectl get -o json` writes it. This is the input issue 15 measured its targets on.

Usage: DRIFT_CORPUS=../shared/corpus benches/corpus-pairs.py N DIR
Without DRIFT_CORPUS it says so and writes nothing (the corpus is not part of the repository).
"""
import json
import os
import sys

import yaml

corpus = os.environ.get("DRIFT_CORPUS")
if not corpus:
    sys.exit("corpus-pairs: DRIFT_CORPUS is not set, so there is nothing to copy (skipped)")
n, root = int(sys.argv[1]), sys.argv[2]
pairs_dir = os.path.join(corpus, "pairs")
pairs = []
for name in sorted(os.listdir(pairs_dir)):
    try:
        with open(os.path.join(pairs_dir, name, "desired.yaml")) as f:
            desired = yaml.safe_load(f)
        with open(os.path.join(pairs_dir, name, "live.yaml")) as f:
            live = yaml.safe_load(f)
    except (OSError, yaml.YAMLError):
        continue
    if isinstance(desired, dict) and desired.get("kind") in ("Deployment", "StatefulSet"):
        pairs.append((desired, live))
if not pairs:
    sys.exit("corpus-pairs: no Deployment or StatefulSet pair in " + pairs_dir)
os.makedirs(os.path.join(root, "desired"), exist_ok=True)
os.makedirs(os.path.join(root, "live"), exist_ok=True)
for i in range(n):
    desired, live = pairs[i % len(pairs)]
    name = f"{desired['metadata']['name']}-{i}"
    d = json.loads(json.dumps(desired))
    l = json.loads(json.dumps(live))
    d["metadata"]["name"] = name
    l["metadata"]["name"] = name
    with open(os.path.join(root, "desired", f"{i:06d}.yaml"), "w") as f:
        yaml.safe_dump(d, f, sort_keys=False, default_flow_style=False)
    with open(os.path.join(root, "live", f"{i:06d}.json"), "w") as f:
        json.dump(l, f, indent=4)
print(f"corpus-pairs: {n} pairs from {len(pairs)} corpus pairs in {root}")
