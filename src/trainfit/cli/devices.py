"""`trainfit devices [--instances] [--json] [--catalog PATH]`: list the catalogs."""

from __future__ import annotations

import argparse
import json

from trainfit.hardware.catalog import catalog, using_catalogs


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("devices", help="list the device catalog (and cloud instances)")
    parser.add_argument("--instances", action="store_true", help="list cloud instances instead")
    parser.add_argument("--json", action="store_true", help="print JSON with every figure's source")
    parser.add_argument(
        "--catalog",
        action="append",
        default=[],
        metavar="PATH",
        help="a user catalog JSON file that extends or overrides the shipped one (repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    from trainfit.report import catalog as render

    with using_catalogs(args.catalog):
        cat = catalog()
    if args.json:
        if args.instances:
            data = [render.instance_dict(i) for i in cat.instances.values()]
        else:
            data = [render.device_dict(d) for d in cat.devices.values()]
        print(json.dumps(data, indent=2))
        return 0
    from rich.console import Console

    table = (
        render.instances_table(cat.instances.values())
        if args.instances
        else render.devices_table(cat.devices.values())
    )
    # NB: narrower than the table, each device is a block of lines (`FitTable`)
    Console().print(table)
    return 0
