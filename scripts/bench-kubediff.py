#!/usr/bin/env python3
"""kubediff over the pairs of benches/real-pairs.py, for the side-by-side table of
docs/benchmarks.md (issue 33).

kubediff (github.com/weaveworks/kubediff, archived) compares each object of the YAML files it is
given with `kubectl get -o yaml` of that object. Here its own code runs unchanged over the
desired files (`kubedifflib.check_files`), except that the running object is read from the
pair's live file instead of a `kubectl get` per object (which would add a process start, about
0.1 s, per object). That file is `kubectl get -o json` output; JSON is YAML, and kubediff reads it
with the same loader it reads `kubectl get -o yaml` with.

    scripts/bench-kubediff.py KUBEDIFF_DIR PAIRS_DIR [--libyaml]

KUBEDIFF_DIR is a checkout of kubediff (its `kubedifflib` package and its requirements,
`pyyaml attrs future`, importable); PAIRS_DIR holds `desired/NNNNNN.yaml` and
`live/NNNNNN.json`. As shipped, kubediff reads YAML with PyYAML's pure-Python `safe_load`; with
`--libyaml` the loader is PyYAML's libyaml binding (`CSafeLoader`), the fastest kubediff can be
made without changing its code. Prints the number of differences found (the JSON printer's
document goes to /dev/null, as drift's report does in scripts/bench-compare.sh).
"""
import os
import sys


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        sys.exit(__doc__)
    kubediff_dir, pairs = args
    sys.path.insert(0, kubediff_dir)
    import yaml

    if "--libyaml" in sys.argv:
        if not yaml.__with_libyaml__:
            sys.exit("PyYAML was built without libyaml: --libyaml cannot be measured")
        loader = yaml.CSafeLoader
        yaml.safe_load = lambda stream: yaml.load(stream, Loader=loader)
        yaml.safe_load_all = lambda stream: yaml.load_all(stream, Loader=loader)

    from kubedifflib import _diff, _kube

    live_dir = os.path.join(pairs, "live")

    class Printer(_diff.JSONPrinter):
        """kubediff's JSON printer that also notes which file is being checked."""

        current = None

        def add(self, path, kube_obj):
            Printer.current = path

    def from_live_file(self, kubeconfig=None, context=None):
        name = os.path.splitext(os.path.basename(Printer.current))[0] + ".json"
        with open(os.path.join(live_dir, name)) as f:
            return yaml.safe_load(f)

    _kube.KubeObject.get_from_cluster = from_live_file
    printer = Printer()
    config = {"namespace": "default", "kubeconfig": None, "context": None}
    sys.stdout = open(os.devnull, "w")
    _diff.check_files([os.path.join(pairs, "desired")], printer, config)
    sys.stdout = sys.__stdout__
    count = sum(len(v) for v in printer.data.values())
    print(f"kubediff: {count} differences in {len(printer.data)} files")


if __name__ == "__main__":
    main()
