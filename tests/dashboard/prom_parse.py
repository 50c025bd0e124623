#!/usr/bin/env python3
"""prom_parse.py: Prometheus text exposition on stdin, its metric families as JSON on stdout.

Uses the parser of the Prometheus project's own Python client (Debian's
python3-prometheus-client), so a test checks /metrics the way a Prometheus
tool reads it. Each family: name, type, help, samples (name, labels, value);
a value that is not finite is a string ("NaN", "+Inf", "-Inf"). Exits 3 when
the parser is not installed, 1 when the text does not parse.
"""
import json
import math
import sys

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("prom_parse.py: prometheus_client is not installed: apt-get install "
          "python3-prometheus-client (scripts/setup --test does)", file=sys.stderr)
    sys.exit(3)


def value(v):
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return v


try:
    families = [{
        "name": f.name,
        "type": f.type,
        "help": f.documentation,
        "samples": [{"name": s.name, "labels": s.labels, "value": value(s.value)} for s in f.samples],
    } for f in text_string_to_metric_families(sys.stdin.read())]
except ValueError as error:
    print(f"prom_parse.py: the text does not parse: {error}", file=sys.stderr)
    sys.exit(1)
json.dump(families, sys.stdout)
