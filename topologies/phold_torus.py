"""PHOLD on an N x N torus: the kernel's benchmark model, and a minimal SST topology example.

    sst topologies/phold_torus.py -- --size 10 --events 4 --time-limit 1us
"""
import sys

import sst
from sst_cdma.engine.config import ConfigError
from sst_cdma.builder.topology import ModelOptionParser

parser = ModelOptionParser(prog="phold_torus.py")
parser.add_argument("--size", type=int, default=10, help="torus side (nodes = size^2)")
parser.add_argument("--events", type=int, default=4, help="initial events per node")
parser.add_argument("--time-limit", default="1us", help="simulated time to run")
parser.add_argument("--latency", default="1ns", help="link latency")
parser.add_argument("--stats", default="", choices=("", "csv", "json", "txt"),
                    metavar="{csv,json,txt}", help="write statistics as csv, json or txt")
args = parser.parse_args(sys.argv[1:])
if args.size < 1:
    raise ConfigError(f"model option error: --size must be >= 1 (the torus side), got {args.size}")

nodes = {}
for x in range(args.size):
    for y in range(args.size):
        node = sst.Component(f"node_{x}_{y}", "testElement.PHOLD")
        node.addParams({"initial_events": args.events, "time_limit": args.time_limit,
                        "seed": 1 + x * args.size + y})
        nodes[x, y] = node

for (x, y), node in nodes.items():
    east, south = nodes[(x + 1) % args.size, y], nodes[x, (y + 1) % args.size]
    sst.Link(f"ew_{x}_{y}").connect((node, "east", args.latency), (east, "west", args.latency))
    sst.Link(f"ns_{x}_{y}").connect((node, "south", args.latency), (south, "north", args.latency))

sst.setStatisticLoadLevel(1)
sst.enableAllStatisticsForAllComponents()
if args.stats:
    ext = {"csv": "CSV", "json": "JSON", "txt": "TXT"}[args.stats]
    sst.setStatisticOutput(f"sst.statOutput{ext}", {"filepath": f"phold.{args.stats}"})
