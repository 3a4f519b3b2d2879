"""``gangplan convert k8s DUMP...``: a Kubernetes dump becomes an instance file.

Parses options, calls :func:`gangplan.adapters.kube.read.read_kube`, writes the instance to
``-o FILE`` (YAML, or JSON by the ``.json`` suffix) or stdout, and prints on stderr the
summary of what was not read, by kind and reason (``-v``: every entry). A missing dump
path or a bad option value ends with ``error: ...`` naming it and exit code 1, never a
traceback; the content of a dump fails the command only with ``--strict`` (then every
document that is not a valid object is an ``error: FILE#DOC: KIND NAME: reason: field:
message`` line); otherwise what cannot be read is listed and the rest converted — unless
nothing at all was read (an empty dump, one of kinds gangplan does not read, a file that is
not a dump): that is an error, exit code 1, and no instance is written, so a script never
takes an empty instance for a converted cluster. The output may not be one of the dump's
files (:func:`~gangplan.adapters.cli.common.guard_output`).
"""

from __future__ import annotations

import textwrap
from collections import Counter
from pathlib import Path

import click
from click.core import ParameterSource

from gangplan.adapters.cli.common import (
    OUTPUT,
    UserError,
    echo_warnings,
    guard_output,
    problems_found,
    user_errors,
)
from gangplan.adapters.cli.convert import convert
from gangplan.adapters.files import dump_data, write_output
from gangplan.adapters.kube.read import KubeOptions, read_kube
from gangplan.adapters.kube.summary import (
    REASON_INVALID,
    REASON_KIND_NOT_READ,
    REASON_NOT_AN_OBJECT,
)
from gangplan.adapters.kube.topology import PRESETS, TEMPLATES
from gangplan.adapters.numbers import counted
from gangplan.models import Snapshot, instance_from_snapshot

__all__ = ["k8s"]


_BASE_RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage")


def _unadvertised(snap: Snapshot, resource: str, option: str) -> tuple[str, list[str]] | None:
    """When nodes exist but none advertises ``resource``: a message naming the extended
    resources they do advertise (and on how many nodes), and those names; else None."""
    if not snap.nodes or any(resource in n.allocatable for n in snap.nodes):
        return None
    counts: Counter[str] = Counter(
        r
        for n in snap.nodes
        for r in n.allocatable
        if r not in _BASE_RESOURCES and not r.startswith("hugepages-")
    )
    names = ", ".join(f"{r} ({k} node{'s' if k != 1 else ''})" for r, k in sorted(counts.items()))
    message = (
        f"{option} {resource!r}: no node of the dump advertises it; "
        f"the nodes advertise {names or 'no extended resource'}"
    )
    return message, sorted(counts)


def _check_resource_options(snap: Snapshot, gpu_resource: str, nic_resource: str) -> None:
    """A GPU or NIC resource name given on the command line that no node advertises is an
    error (a typo would silently turn every GPU into an ordinary resource); the default GPU
    name absent while nodes advertise another ``*gpu*`` resource is a warning.

    Raises:
        UserError: a resource option given that no node advertises.
    """
    ctx = click.get_current_context()
    for option, name in (("gpu_resource", gpu_resource), ("nic_resource", nic_resource)):
        found = _unadvertised(snap, name, f"--{option.replace('_', '-')}")
        if found is None:
            continue
        message, advertised = found
        if ctx.get_parameter_source(option) is not ParameterSource.DEFAULT:
            raise UserError([message])
        if option == "gpu_resource" and any("gpu" in r.lower() for r in advertised):
            echo_warnings([f"{message}; name the GPU resource with --gpu-resource"])


@convert.command("k8s")
@click.argument("dump", nargs=-1, required=True)
@click.option(
    "--topology-labels",
    metavar="PRESET|[NAME=]KEY,...",
    help=(
        "topology levels from node labels, top level first: a preset "
        f"({', '.join(PRESETS)}) or label keys, "
        "e.g. 'spine=example.com/spine,leaf=example.com/leaf' "
        "(default: Volcano HyperNodes, else a Kueue Topology, else none)"
    ),
)
@click.option(
    "--device-layout",
    metavar="TEMPLATE|FILE",
    help=(
        "device layout for nodes without a Koordinator Device: "
        f"a template ({', '.join(TEMPLATES)}) "
        "or a YAML file with one DeviceLayout; given to nodes whose GPU count matches"
    ),
)
@click.option(
    "--scheduler-name",
    "scheduler_names",
    multiple=True,
    help="read only pending pods of this scheduler (repeatable; default: all)",
)
@click.option(
    "--gpu-resource", default="nvidia.com/gpu", show_default=True, help="the GPU resource name"
)
@click.option(
    "--nic-resource", default="rdma/hca", show_default=True, help="the RDMA NIC resource name"
)
@click.option(
    "--default-queue",
    default="default",
    show_default=True,
    help="queue of gangs nothing else assigns one",
)
@click.option(
    "-o",
    "--output",
    type=OUTPUT,
    help="write the instance here (.json: JSON; else YAML); default: stdout",
)
@click.option("-v", "--verbose", is_flag=True, help="list every entry of the summary")
@click.option(
    "--strict",
    is_flag=True,
    help="exit 1, writing nothing, if any document is not a valid object (CI use)",
)
def k8s(
    dump: tuple[str, ...],
    topology_labels: str | None,
    device_layout: str | None,
    scheduler_names: tuple[str, ...],
    gpu_resource: str,
    nic_resource: str,
    default_queue: str,
    output: Path | None,
    verbose: bool,
    strict: bool,
) -> None:
    """Read DUMP (kubectl get -o yaml|json output, manifests, folders, or - for stdin) into
    an instance file; list on stderr what was not read, by kind and reason."""
    guard_output(output, *dump, device_layout, kind="Instance")
    options = KubeOptions(
        topology_labels=topology_labels,
        device_layout=device_layout,
        scheduler_names=scheduler_names,
        gpu_resource=gpu_resource,
        nic_resource=nic_resource,
        default_queue=default_queue,
    )
    with user_errors():
        result = read_kube(list(dump), options)
    snap = result.snapshot
    _check_resource_options(snap, gpu_resource, nic_resource)
    if strict:
        bad = [
            e for e in result.summary.skipped if e.reason in (REASON_INVALID, REASON_NOT_AN_OBJECT)
        ]
        if bad:
            raise UserError(map(str, bad), problems_found(len(bad)))
    for w in result.warnings():  # at 80 columns, as the summary under them
        click.echo(textwrap.fill(f"warning: {w}", 80, subsequent_indent="  "), err=True)
    for line in result.summary.lines(details=-1 if verbose else 3, width=80):
        click.echo(line, err=True)
    if not sum(result.summary.read.values()):
        skipped = len(result.summary.skipped)
        kinds_only = all(e.reason == REASON_KIND_NOT_READ for e in result.summary.skipped)
        why = (
            "the dump holds no object"
            if not skipped
            else f"not one object of a kind gangplan reads ({skipped} not read, listed above)"
            if kinds_only
            else f"not one object could be converted ({skipped} not read, listed above)"
        )
        raise UserError([f"{', '.join(dump)}: nothing read: {why}; no instance written"])
    if not (snap.nodes or snap.gangs or snap.running or snap.queues):
        n = sum(result.summary.read.values())
        raise UserError(
            [
                f"{', '.join(dump)}: nothing left: the {n} object{'s' if n != 1 else ''} read "
                "gave no node, queue, gang or running pod (why is listed above); "
                "no instance written"
            ]
        )
    fmt = "json" if output is not None and output.suffix.lower() == ".json" else "yaml"
    text = dump_data(instance_from_snapshot(snap), fmt)
    gpus = sum(n.allocatable.get(snap.gpu, 0) for n in snap.nodes) // 1000
    counts = [
        counted(len(snap.nodes), "node"),
        counted(gpus, "GPU"),
        counted(len(snap.levels), "level"),
        counted(len(snap.queues), "queue"),
        f"{counted(len(snap.gangs), 'pending gang')} "
        f"({counted(sum(g.size for g in snap.gangs), 'pod')})",
        counted(len(snap.running), "running pod"),
    ]
    if output is None:
        click.echo(text, nl=False)
        click.echo(_fill("instance:", counts), err=True)
    else:
        with user_errors(counted=False):
            write_output(output, text)
        click.echo(_fill(f"wrote {output}:", counts), err=True)


def _fill(head: str, parts: list[str], width: int = 80) -> str:
    """``head`` and ``parts`` joined by ``, ``, wrapped at ``width`` between parts only
    (continuation lines indented 2)."""
    lines = [head]
    for i, part in enumerate(parts):
        piece = part + ("," if i < len(parts) - 1 else "")
        if len(lines[-1]) + 1 + len(piece) > width and lines[-1].strip():
            lines.append("  " + piece)
        else:
            lines[-1] += " " + piece
    return "\n".join(lines)
