"""`python -m agents.node_agent --listen 0.0.0.0:9460 --token-file PATH [--token-mode per-node]`
(or --once, --record)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys

from agents.node_agent.collector import collect
from agents.node_agent.credentials import node_token
from agents.node_agent.nvml import NvmlAdapter, NvmlUnavailable, record
from agents.node_agent.server import make_server, parse_listen

EXIT_NO_NVML = 2
# Not 9400: that is dcgm-exporter's port, and the GPU Operator runs it on the same nodes.
DEFAULT_LISTEN = "0.0.0.0:9460"


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m agents.node_agent", description=__doc__)
    parser.add_argument("--listen", default=os.environ.get("TESSERA_AGENT_LISTEN") or DEFAULT_LISTEN,
                        help=f"HOST:PORT to serve on (default: $TESSERA_AGENT_LISTEN, else {DEFAULT_LISTEN})")
    parser.add_argument("--token-file", help="file holding the bearer token callers must send (per-node: "
                                             "the cluster secret this node's token derives from)")
    parser.add_argument("--token-mode", choices=("shared", "per-node"),
                        default=os.environ.get("TESSERA_AGENT_TOKEN_MODE") or "shared",
                        help="shared: the file is the token; per-node: accept only HMAC(secret, node name)")
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


def agent_token(args: argparse.Namespace) -> str:
    """The token callers must send: the file's, or in per-node mode this node's token derived from it."""
    if args.once or args.record:
        return ""
    token = _read_token(args.token_file)
    return node_token(token, args.node_name) if args.token_mode == "per-node" else token


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    token = agent_token(args)
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
