"""Label and annotation keys and values as Kubernetes checks them, and which keys a Capsule may
not put on a step's pod.

A leaf of the plan language: the Capsule's fields that hold labels (nodeSelector, the step pods'
podMetadata, the Plan labels it propagates, affinity's label selectors) are checked by these
functions, with messages that say what a label is (pydantic's would quote the regex).

**Reserved keys** (`reserved_key`): a Capsule adds labels and annotations to its step pods
(cost tools read them), never one that someone else reads to decide something:

- planops' own domain (`planops.dev/...` and its subdomains, `answer.planops.dev/...`): the
  operator finds a run's Jobs and pods, and which step each is, by them (api.names; the chart's
  admission policy lets only the operator write them). `app.kubernetes.io/managed-by` is the
  operator's too (`planops`).
- Kubernetes' own domains (`kubernetes.io`, `k8s.io` and their subdomains): the Job controller
  selects its pods by `batch.kubernetes.io/controller-uid` (and the unprefixed `controller-uid`
  and `job-name`), and annotations there set a container's AppArmor or seccomp profile, past
  what the step's security profile says. Kept: `app.kubernetes.io/...` (Kubernetes' recommended
  labels: name, part-of, component, ...) and the cluster autoscaler's annotations
  (`cluster-autoscaler.kubernetes.io/safe-to-evict`), which only say where a pod may go.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field

from planops.api.names import GROUP

#: A label key as Kubernetes checks it: an optional DNS-subdomain prefix (at most 253 characters)
#: and `/`, then a name of at most 63 characters (letters, digits, `-`, `_`, `.`).
LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"
LABEL_KEY, LABEL_VALUE = re.compile(LABEL_KEY_PATTERN), re.compile(LABEL_VALUE_PATTERN)
#: the longest label key: a 253-character prefix, `/`, a 63-character name
MAX_KEY = 317
#: A DNS label (RFC 1123): a namespace's, a container's or a port's name
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"


def label_key(key: str, where: str) -> str:
    """`key` when it is a label key (an annotation key has the same syntax), else ValueError
    naming `where` it was found."""
    if not LABEL_KEY.fullmatch(key) or len(key.rsplit("/", 1)[0]) > 253:
        raise ValueError(
            f"{where} {key!r} is not a label key: [prefix/]name, the name at most 63 letters, "
            "digits, '-', '_' or '.', the prefix a DNS subdomain (example.com/zone)"
        )
    return key


def label_value(value: str, where: str) -> str:
    """`value` when it is a label value, else ValueError naming `where` it was found."""
    if not LABEL_VALUE.fullmatch(value):
        raise ValueError(
            f"{where}: {value!r} is not a label value (at most 63 letters, digits, '-', '_' or "
            "'.', starting and ending with a letter or digit)"
        )
    return value


def schema_bounds(**bounds: Any) -> dict[str, Any]:
    """Bounds stated in the model's JSON Schema (so the CRD's come from here, api.structural)
    but checked by the model's own validators, whose messages say what a label is (pydantic's
    would quote the regex)."""
    return bounds


LabelKey = Annotated[
    str,
    Field(
        description="A label key.",
        json_schema_extra=schema_bounds(maxLength=MAX_KEY, pattern=LABEL_KEY_PATTERN),
    ),
]
LabelValue = Annotated[
    str,
    Field(
        description="A label value.",
        json_schema_extra=schema_bounds(maxLength=63, pattern=LABEL_VALUE_PATTERN),
    ),
]

#: the label the operator puts on everything it makes (kube.manifests.MANAGED_BY)
MANAGED_BY_KEY = "app.kubernetes.io/managed-by"
#: Kubernetes' domains whose keys its components read; the prefixes of those a Capsule may set
_KUBERNETES = ("kubernetes.io", "k8s.io")
_KEPT = {
    "label": ("app.kubernetes.io",),
    "annotation": ("app.kubernetes.io", "cluster-autoscaler.kubernetes.io"),
}
#: the Job controller's unprefixed labels on its pods
_JOB_CONTROLLER = ("controller-uid", "job-name")


def _in(domain: str, parent: str) -> bool:
    return domain == parent or domain.endswith("." + parent)


def reserved_key(key: str, kind: Literal["label", "annotation"]) -> str | None:
    """Why a Capsule may not put label or annotation `key` on a step's pod, or None: it may."""
    prefix, slash, _ = key.rpartition("/")
    domain = prefix.lower()
    if _in(domain, GROUP) or key == MANAGED_BY_KEY:
        return (
            f"{key} is planops' own: the operator finds a run's Jobs and pods, and which step "
            f"each is, by its {GROUP}/ keys (and marks them {MANAGED_BY_KEY}: planops)"
        )
    if any(_in(domain, k) for k in _KUBERNETES) and domain not in _KEPT[kind]:
        kept = " and ".join(f"{p}/" for p in _KEPT[kind])
        return (
            f"{key} is Kubernetes' own ({domain}): its components read such keys (the Job "
            "controller selects its pods by them; annotations set AppArmor and seccomp "
            f"profiles, past the step's security profile). Of Kubernetes' domains only {kept} "
            f"may be set here"
        )
    if not slash and kind == "label" and key in _JOB_CONTROLLER:
        return f"{key} is the Job controller's label on its pods (it selects them by it)"
    return None


def reserved_key_rule(kind: Literal["label", "annotation"]) -> tuple[str, str]:
    """`reserved_key` as a CEL rule over keys `k`, and its message (the CRD refuses the Capsule
    at `kubectl apply`; the model's message says why)."""
    domains = "|".join(re.escape(d) for d in (GROUP, *_KUBERNETES))
    kept = "|".join(re.escape(d) for d in _KEPT[kind])
    rule = (
        f"(!k.matches(r'^([^/]*\\.)?({domains})/') || k.matches(r'^({kept})/')) "
        f"&& k != '{MANAGED_BY_KEY}'"
    )
    if kind == "label":
        rule += " && !(k in [" + ", ".join(f"'{k}'" for k in _JOB_CONTROLLER) + "])"
    kept_keys = " and ".join(f"{p}/" for p in _KEPT[kind])
    not_ours = f", not {MANAGED_BY_KEY.rsplit('/', 1)[1]}" if kind == "label" else ""
    message = (
        f"no key of planops' ({GROUP}/) or Kubernetes' own domains (but {kept_keys}{not_ours})"
    )
    return f"self.all(k, {rule})", message
