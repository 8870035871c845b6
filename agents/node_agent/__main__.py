"""`python -m agents.node_agent --listen 0.0.0.0:9460 [--allow-serviceaccount NS:NAME]` (or --once,
--record): serves the node report to the one ServiceAccount allowed, checked by TokenReview."""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys

from agents.node_agent import auth
from agents.node_agent.collector import collect
from agents.node_agent.nvml import NvmlAdapter, NvmlUnavailable, record
from agents.node_agent.server import make_server, parse_listen

EXIT_NO_NVML = 2
# Not 9400: that is dcgm-exporter's port, and the GPU Operator runs it on the same nodes.
DEFAULT_LISTEN = "0.0.0.0:9460"


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m agents.node_agent", description=__doc__)
    parser.add_argument("--listen", default=os.environ.get("TESSERA_AGENT_LISTEN") or DEFAULT_LISTEN,
                        help=f"HOST:PORT to serve on (default: $TESSERA_AGENT_LISTEN, else {DEFAULT_LISTEN})")
    parser.add_argument("--auth", choices=auth.MODES,
                        default=os.environ.get("TESSERA_AGENT_AUTH") or auth.SERVICEACCOUNT,
                        help=f"{auth.SERVICEACCOUNT}: callers' ServiceAccount tokens, checked by TokenReview; "
                             f"{auth.DEV_STATIC_TOKEN}: DEV ONLY, the token in --token-file (needs DEBUG=1 "
                             f"or {auth.ALLOW_DEV_ENV}=1)")
    parser.add_argument("--allow-serviceaccount", metavar="NAMESPACE:NAME",
                        default=os.environ.get("TESSERA_AGENT_ALLOWED_SERVICEACCOUNT") or auth.POLLER,
                        help=f"the one ServiceAccount whose tokens may read the report (default: {auth.POLLER})")
    parser.add_argument("--audience", default=os.environ.get("TESSERA_AGENT_AUDIENCE") or auth.AUDIENCE,
                        help=f"the audience callers' tokens must be bound to (default: {auth.AUDIENCE})")
    parser.add_argument("--kubeconfig", help="the agent's own credentials for TokenReviews "
                                             "(default: its pod's ServiceAccount)")
    parser.add_argument("--token-file", help=f"{auth.DEV_STATIC_TOKEN} only: file holding the token callers send")
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
    if args.once or args.record:
        return args
    if args.auth == auth.DEV_STATIC_TOKEN and not args.token_file:
        parser.error(f"--token-file is required with --auth {auth.DEV_STATIC_TOKEN}")
    refusal = auth.dev_auth_refusal(args.auth, debug=_flag(os.environ.get("DEBUG")),
                                    allowed=_flag(os.environ.get("TESSERA_ALLOW_DEV_AGENT_AUTH")))
    if refusal:
        parser.error(refusal)
    try:
        auth.service_account_user(args.allow_serviceaccount)
    except ValueError as error:
        parser.error(str(error))
    return args


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _read_token(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        token = f.read().strip()
    if not token:
        raise SystemExit(f"node agent: token file {path} is empty")
    return token


def authenticator(args: argparse.Namespace) -> auth.Authenticator:
    """Who may read the report: the allowed ServiceAccount's tokens, or the dev-only static token."""
    if args.auth == auth.DEV_STATIC_TOKEN:
        logging.warning("node agent: DEV ONLY static token auth; never on a shared cluster")
        return auth.StaticToken(_read_token(args.token_file))
    from kubernetes import client, config

    try:
        if args.kubeconfig:
            config.load_kube_config(config_file=args.kubeconfig)
        else:
            config.load_incluster_config()
    except config.ConfigException as error:
        raise SystemExit(f"node agent: no credentials to review tokens with ({error}); run it in its pod "
                         f"(deploy/node-agent.yaml), pass --kubeconfig, or for development --auth "
                         f"{auth.DEV_STATIC_TOKEN}") from error
    review = auth.kube_reviewer(client.ApiClient(), args.audience)
    return auth.ServiceAccountTokens(review, args.allow_serviceaccount)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    checker = None if args.once or args.record else authenticator(args)
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
            parse_listen(args.listen), checker, lambda: collect(nvml, args.node_name).to_dict()
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
