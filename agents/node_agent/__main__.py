"""`python -m agents.node_agent --listen 0.0.0.0:9400 --token-file PATH` (or --once, --record)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys

from agents.node_agent.collector import collect
from agents.node_agent.nvml import NvmlAdapter, NvmlUnavailable, record
from agents.node_agent.server import make_server, parse_listen

EXIT_NO_NVML = 2


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m agents.node_agent", description=__doc__)
    parser.add_argument("--listen", default="0.0.0.0:9400", help="HOST:PORT to serve on")
    parser.add_argument("--token-file", help="file holding the bearer token callers must send")
    parser.add_argument(
        "--node-name",
        default=os.environ.get("NODE_NAME") or socket.gethostname(),
        help="name to report (default: $NODE_NAME, else the hostname)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="print one report as JSON and exit")
    mode.add_argument(
        "--record", action="store_true", help="print the raw NVML answers (a test fixture)"
    )
    args = parser.parse_args(argv)
    if not (args.once or args.record or args.token_file):
        parser.error("--token-file is required to serve")
    return args


def _read_token(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        token = f.read().strip()
    if not token:
        raise SystemExit(f"node agent: token file {path} is empty")
    return token


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    token = _read_token(args.token_file) if not (args.once or args.record) else ""
    try:
        nvml = NvmlAdapter()
    except NvmlUnavailable as exc:
        print(f"node agent: no NVML on this machine, so no GPUs to report ({exc})", file=sys.stderr)
        return EXIT_NO_NVML
    with nvml:
        if args.record:
            print(json.dumps(record(nvml, args.node_name), indent=1))
            return 0
        if args.once:
            print(json.dumps(collect(nvml, args.node_name).to_dict(), indent=1))
            return 0
        server = make_server(
            parse_listen(args.listen), token, lambda: collect(nvml, args.node_name).to_dict()
        )
        logging.info("node agent serving %s on %s", args.node_name, args.listen)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
