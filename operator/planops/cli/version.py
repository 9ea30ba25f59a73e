"""`kubectl plan version [--client] [-o json|yaml]`: this client's version, and, as `kubectl
version` adds the server's, the cluster's Kubernetes version and the planops operator's.

The operator's version is read where any user of planops can read it without rights on the
operator's namespace: the `app.kubernetes.io/version` label the chart puts on the planops
CRDs (its appVersion, the operator image's default tag), as `tkn version` reads Tekton's from an
object of the installation. CRDs installed by hand (`kubectl apply -f crds/`) carry no label,
and a user may be refused the read of CRDs: the line then says which, and why, and the exit
code is still 0 (the client and the cluster answered). A cluster that cannot be reached is exit
3, after the client's version, as kubectl prints its own first.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import yaml

from planops import __version__
from planops.cli.exit_codes import EXIT_OK
from planops.kube.api import CliApi
from planops.kube.client import ApiError

#: the CRD whose label names the installed operator's version, and the label
CRD = "plans.planops.dev"
LABEL = "app.kubernetes.io/version"


def client(args: argparse.Namespace) -> int:
    """`version --client`: no cluster."""
    _print({"clientVersion": __version__}, args.output)
    return EXIT_OK


def client_line(args: argparse.Namespace) -> None:
    """Said before the cluster is asked, so an unreachable cluster still shows it."""
    if args.output == "text":
        print(f"Client Version: {__version__}", flush=True)


async def cmd_version(kube: CliApi, args: argparse.Namespace, ns: str) -> int:
    server = await kube.server_version()
    operator, why = await operator_version(kube)
    found: dict[str, Any] = {
        "clientVersion": __version__,
        "serverVersion": server,
        "operatorVersion": operator,
    }
    if why:
        found["operatorVersionUnknown"] = why
    if args.output == "text":
        print(f"Server Version: {server.get('gitVersion', '?')}")
        print(f"Operator Version: {operator or 'unknown'}" + (f" ({why})" if why else ""))
    else:
        _print(found, args.output)
    return EXIT_OK


async def operator_version(kube: CliApi) -> tuple[str | None, str | None]:
    """(the version, None), or (None, why it cannot be said)."""
    try:
        crd = await kube.get_crd(CRD)
    except ApiError as e:
        if e.status in (401, 403):
            return None, (
                f"you may not read the {CRD} CRD, whose {LABEL} label says it: ask for `get` "
                "on customresourcedefinitions"
            )
        raise
    if crd is None:
        return None, f"planops is not installed: no {CRD} CRD (docs/install.md)"
    version = ((crd.get("metadata") or {}).get("labels") or {}).get(LABEL)
    if not version:
        return None, (
            f"the {CRD} CRD has no {LABEL} label: it was applied by hand, not by the planops chart"
        )
    return str(version), None


def _print(found: dict[str, Any], output: str) -> None:
    if output == "json":
        print(json.dumps(found, indent=2))
    elif output == "yaml":
        sys.stdout.write(yaml.safe_dump(found, sort_keys=False))
    else:
        print(f"Client Version: {found['clientVersion']}")
