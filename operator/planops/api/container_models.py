"""What a container of a step or a tool gets besides its command: environment variables (a
value, or a key of a Secret or ConfigMap the kubelet reads) and volume mounts, with the rules of
their names and paths. A Capsule's tool has env (api.capsule_models.Tool); a shell or script
step has env and volumeMounts too (api.models.Step), only as its Capsule grants them
(api.grant_models, engine.step_grants).
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, field_validator, model_validator

from planops.api.base import NAME_PATTERN, Model
from planops.api.crd_hints import crd

#: An environment variable name (a C identifier, as shells and most programs read them).
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
#: Set by planops on every step container; neither a Capsule's tool nor a step may redefine them.
RESERVED_ENV_PREFIX = "PLANOPS_"


def _name_of(what: str) -> Any:
    return Field(pattern=NAME_PATTERN, description=f"The {what}'s name.")


class KeyRef(Model):
    """A key of a Secret or ConfigMap in the Plan's namespace (resolved by the kubelet)."""

    name: str = _name_of("Secret's or ConfigMap")
    key: str = Field(min_length=1, max_length=253, description="The key.")
    optional: bool = Field(
        default=False, description="Start the step even when the key is missing."
    )


class SecretKeyRef(KeyRef):
    """A key of a Secret in the Plan's namespace."""

    name: str = _name_of("Secret")


class ConfigMapKeyRef(KeyRef):
    """A key of a ConfigMap in the Plan's namespace."""

    name: str = _name_of("ConfigMap")


class EnvSource(Model):
    """Exactly one of secretKeyRef or configMapKeyRef."""

    model_config = ConfigDict(
        json_schema_extra=crd(
            rules=[
                (
                    "has(self.secretKeyRef) != has(self.configMapKeyRef)",
                    "exactly one of secretKeyRef or configMapKeyRef",
                )
            ]
        )
    )

    secret_key_ref: SecretKeyRef | None = None
    config_map_key_ref: ConfigMapKeyRef | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> EnvSource:
        if (self.secret_key_ref is None) == (self.config_map_key_ref is None):
            raise ValueError("exactly one of secretKeyRef or configMapKeyRef")
        return self


class EnvVar(Model):
    """One variable: exactly one of value or valueFrom."""

    # an environment variable of a tool's container: a value, or a Secret/ConfigMap key
    model_config = ConfigDict(
        json_schema_extra=crd(
            rules=[
                ("has(self.value) != has(self.valueFrom)", "exactly one of value or valueFrom"),
                (
                    "!self.name.startsWith('PLANOPS_')",
                    "names starting with PLANOPS_ are set by planops",
                ),
            ]
        )
    )

    name: str = Field(pattern=ENV_NAME_PATTERN, max_length=256, description="The variable's name.")
    value: str | None = Field(default=None, description="A literal value.")
    value_from: EnvSource | None = None

    @model_validator(mode="after")
    def _one_source(self) -> EnvVar:
        if self.name.startswith(RESERVED_ENV_PREFIX):
            raise ValueError(f"{self.name}: names starting with PLANOPS_ are set by planops")
        if (self.value is None) == (self.value_from is None):
            raise ValueError(f"{self.name}: exactly one of value or valueFrom")
        return self


# -- what a shell or script step may reach beyond its restricted pod, as its Capsule grants it
# (engine.step_grants judges the grants): env values and keys, volumes mounted by name

#: the longest script: it reaches the interpreter as one argument (`sh -c SCRIPT`), and Linux
#: takes at most 128 KiB in one (MAX_ARG_STRLEN); 32,000 characters fit in it whatever their
#: UTF-8 length
MAX_SCRIPT = 32_000
#: the top directories of a step container that are not a plan's to mount over: the run's
#: workspace, planops' own, and the kernel's and runtime's (a mount over /proc is how container
#: escapes have begun)
RESERVED_MOUNTS = ("workspace", "planops", "proc", "sys", "dev")
#: the image's programs and libraries (where the Filesystem Hierarchy Standard puts them): a
#: volume over one (a claim an earlier step copied `sh` into as `echo`, mounted at /bin) would
#: make an allowed first word any program, as PATH would (`IMAGE_ENV`); not a step's to mount
#: over, nor /etc itself (the dynamic loader's ld.so.preload, ld.so.cache) or /etc/alternatives
#: (where /usr/bin/awk, java, cc lead). Under /usr, only the sources' places /usr/src and
#: /usr/local/src are a step's
PROGRAM_MOUNTS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr")
PROGRAM_MOUNTS_KEPT = ("/usr/src", "/usr/local/src")
PROGRAM_MOUNTS_EXACT = ("/etc", "/etc/alternatives")
#: an absolute path without empty parts (no `//`, no trailing `/`), not `/` itself, without
#: control characters
_MOUNT_SHAPE = r"^(/[^/\x00-\x1f\x7f]+)+$"


#: the variables that choose which program a step's command runs, or what code runs inside it
#: whatever the program: PATH (where the first word of a shell step, or a script's interpreter,
#: is looked up: `PATH=/workspace` made the allowed `echo` a copy of `sh`), the dynamic loader's
#: (every `LD_*`: LD_PRELOAD loads any file as code into any program; GCONV_PATH), and bash's
#: and sh's (BASH_ENV, ENV: a file sourced; SHELLOPTS, BASHOPTS, PS4: `xtrace` expanding a
#: `$(...)` of PS4) in any shell script the program is or starts. They are the image's: a step
#: sets none (a script may `export` them itself: its interpreter runs anything already)
IMAGE_ENV = ("PATH", "GCONV_PATH", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4")
#: the dynamic loader's variables (glibc's and musl's)
LOADER_ENV_PREFIX = "LD_"


def image_env_problem(name: str) -> str | None:
    """Why a step may not set variable `name`, or None: it may (`IMAGE_ENV`)."""
    if name in IMAGE_ENV or name.startswith(LOADER_ENV_PREFIX):
        return (
            f"{name} is the image's: it chooses which program a step's command runs (PATH "
            "looks up the first word, LD_* and GCONV_PATH load code into any program, BASH_ENV, "
            "ENV, SHELLOPTS, BASHOPTS and PS4 run code in any shell script), so shell.allow "
            "would allow any program; a script step may export it itself"
        )
    return None


class StepEnvVar(EnvVar):
    """One variable of a shell or script step: exactly one of value or valueFrom; not one of
    the image's variables, which choose the program that runs (PATH, LD_*, GCONV_PATH, BASH_ENV,
    ENV, SHELLOPTS, BASHOPTS, PS4)."""

    # no CEL rule for IMAGE_ENV (nor for a mount's reserved paths): one per env entry of a
    # Plan's 30,000 steps exceeds the API server's cost budget for a rule (4.4x; the CRD is
    # refused); the model refuses them: validate, the admission webhook, the reconciler

    value: str | None = Field(
        default=None,
        max_length=16384,
        description="The value; it may hold {{...}} templates, rendered once when the step "
        "starts: the rendered text is the value, never rendered again, split or given to a "
        "shell (how a script reads a plan's input or a step's output: as data).",
    )
    value_from: EnvSource | None = Field(
        default=None,
        description="A key of a Secret or ConfigMap of the namespace, resolved by the kubelet "
        "(the operator never reads it); only of one the Capsule lists in env.secrets / "
        "env.configMaps.",
    )

    @model_validator(mode="after")
    def _not_the_images(self) -> StepEnvVar:
        problem = image_env_problem(self.name)
        if problem is not None:
            raise ValueError(problem)
        return self


def mount_path_problem(path: str) -> str | None:
    """Why `path` may not be a step's mountPath, or None: it is absolute and normalized (no
    `//`, `.` or `..` part, no trailing `/`, no control character), and outside /workspace,
    /planops, /proc, /sys, /dev and the image's programs (`PROGRAM_MOUNTS`)."""
    parts = path.split("/")
    if (
        not path.startswith("/")
        or path == "/"
        or "" in parts[1:]
        or {".", ".."} & set(parts)
        or any(c < " " or c == "\x7f" for c in path)
    ):
        return (
            f"mountPath {path!r}: an absolute, normalized path (no '//', '.' or '..' part, no "
            "trailing '/', no control character), other than '/'"
        )
    if parts[1] in RESERVED_MOUNTS:
        return (
            f"mountPath {path!r}: /{parts[1]} is reserved (/workspace is the run's workspace, "
            "/planops planops' own, /proc, /sys and /dev the kernel's): mount elsewhere"
        )
    if path in PROGRAM_MOUNTS_EXACT or (
        parts[1] in PROGRAM_MOUNTS and not _within(path, PROGRAM_MOUNTS_KEPT)
    ):
        return (
            f"mountPath {path!r}: the image's programs and libraries (/bin, /sbin, /lib*, /usr "
            "but /usr/src, and /etc itself, /etc/alternatives) are the image's: a volume there "
            "would change which program a step's allowed command runs; mount elsewhere"
        )
    return None


def _within(path: str, trees: tuple[str, ...]) -> bool:
    return any(path == t or path.startswith(t + "/") for t in trees)


class VolumeMount(Model):
    """A volume of the Capsule (its spec.volumes) mounted into a shell or script step."""

    name: str = Field(
        min_length=1, max_length=63, description="The name of one of the Capsule's volumes."
    )
    mount_path: str = Field(
        max_length=1024,
        description="Where: an absolute, normalized path outside /workspace, /planops, /proc, "
        "/sys, /dev and the image's programs and libraries (/bin, /sbin, /lib*, /usr but "
        "/usr/src, /etc itself, /etc/alternatives).",
        json_schema_extra={"pattern": _MOUNT_SHAPE},
    )
    read_only: bool | None = Field(
        default=None,
        description="Mount it read-only. Default: as the Capsule's volume says (a volume the "
        "Capsule marks readOnly, and every configMap or secret volume, is read-only: asking "
        "for a writable mount of one is refused).",
    )

    @field_validator("mount_path")
    @classmethod
    def _mountable(cls, value: str) -> str:
        problem = mount_path_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


def distinct(what: str, values: list[str]) -> None:
    """Refuse `values` that hold one twice, naming `what` they are."""
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise ValueError(f"{what} declared twice: {', '.join(twice)}")
