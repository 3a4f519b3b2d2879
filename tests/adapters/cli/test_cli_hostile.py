"""Hostile command lines and files through the whole CLI: option values that are not finite
or too large, input that is not text or too big, and outputs that must never destroy what
stands at their path.

Each test rebuilds a reproducer found by breaking gangplan on purpose (issue 11, "No input
crashes, hangs, eats memory or destroys a file"); the comment under ``before:`` says what
happened then. Expected messages are written out by hand.
"""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gangplan.adapters.cli import main

Limited = Callable[..., subprocess.CompletedProcess[str]]
HEAD = "apiVersion: gangplan.io/v1alpha1\nkind: Instance\n"


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def assert_usage_error(result: Result, message: str) -> None:
    """Exit 2 (click's usage error), the message on stderr, no traceback."""
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert message in result.stderr, result.stderr


# --------------------------------------------------------------------------- option values

REPLAY = ["replay", "alibaba", "--nodes", "nodes.csv", "--pods", "pods.csv"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # before: ValueError: popularity must be in (0, 1] (got nan), a traceback
        ([*REPLAY, "--popularity", "nan"], "'nan' is not a finite number"),
        # before: never ended (random pods drawn until the demand reached inf or nan x GPUs)
        ([*REPLAY, "--target", "inf"], "'inf' is not a finite number"),
        ([*REPLAY, "--target", "nan"], "'nan' is not a finite number"),
        # before: 10^9 x the cluster's GPUs, drawn pod by pod: hours, and gigabytes
        ([*REPLAY, "--target", "1e9"], "1000000000.0 is not in the range 0.01<=x<=10.0"),
        # before: CP-SAT was given an infinite budget per cycle
        ([*REPLAY, "--placer", "cpsat", "--time-limit", "inf"], "'inf' is not a finite number of"),
        ([*REPLAY, "--time-limit", "nan"], "'nan' is not a finite number of seconds"),
        ([*REPLAY, "--workers", "100000"], "100000 is not in the range 1<=x<=64"),
        ([*REPLAY, "--seeds", "1000000000"], "1000000000 is not in the range 1<=x<=1000"),
        # before: pending gangs were drawn until their GPUs reached inf: never ended
        (["generate", "fat-tree", "--demand", "inf"], "'inf' is not a finite number"),
        (["generate", "fat-tree", "--demand", "1000"], "1000.0 is not in the range 0<=x<=100.0"),
        (["generate", "fat-tree", "--demand", "nan"], "'nan' is not a finite number"),
        (["generate", "fat-tree", "--load", "nan"], "'nan' is not a finite number"),
        (["bench", "--workers", "100000"], "100000 is not in the range 1<=x<=64"),
    ],
)
def test_option_values_that_are_not_finite_or_too_large(args: list[str], message: str) -> None:
    assert_usage_error(run(*args), message)


def assert_user_error(result: Result) -> list[str]:
    """Exit 1 through SystemExit, no traceback; returns the ``error:`` lines of stderr."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    return [line for line in result.stderr.splitlines() if line.startswith("error: ")]


# --------------------------------------------------------------------------- YAML aliases


def alias_chain(indent: str, levels: int = 9) -> str:
    """YAML lines ``l0: &l0 [v, ...]`` .. ``l{levels-1}``, each a list of ten aliases of the
    one before: ``*l8`` expands to 10^9 values (a few hundred bytes of text)."""
    lines = [f"{indent}l0: &l0 [{', '.join(['v'] * 10)}]"]
    lines += [f"{indent}l{k}: &l{k} [{', '.join([f'*l{k - 1}'] * 10)}]" for k in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_an_instance_of_a_billion_laughs_is_refused(
    tmp_path: Path, gangplan_limited: Limited
) -> None:
    # before: the 10^9 node-affinity values took 4 GB and the process panicked; now the
    # document is refused before anything walks it (a child with 1 GiB checks it)
    inst = tmp_path / "laughs.yaml"
    inst.write_text(
        HEAD
        + "metadata:\n"
        + alias_chain("  ")
        + textwrap.dedent(
            """\
            nodes: [{name: n1, allocatable: {cpu: 4}}]
            queues: [{name: q}]
            gangs:
            - name: g
              queue: q
              roles:
              - name: w
                count: 1
                node_affinity:
                - match_expressions: [{key: k, operator: In, values: *l8}]
            """
        ),
        encoding="utf-8",
    )
    done = gangplan_limited("validate", str(inst))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(
        f"error: {inst}: line 1 column 1: not valid YAML: the document contains excessive "
        "aliasing: its aliases expand its "
    )


def test_a_pod_of_a_billion_laughs_is_listed_and_the_rest_converts(
    tmp_path: Path, gangplan_limited: Limited
) -> None:
    # before: the same 4 GB in convert k8s; now the document is listed, the node after it read
    dump = tmp_path / "pod.yaml"
    dump.write_text(
        textwrap.dedent(
            """\
            apiVersion: v1
            kind: Pod
            metadata:
              name: p
              labels:
            """
        )
        + alias_chain("    ")
        + textwrap.dedent(
            """\
            spec:
              containers: [{name: c, image: x, args: *l8}]
            ---
            apiVersion: v1
            kind: Node
            metadata: {name: n1}
            status: {allocatable: {cpu: "4", pods: "110"}}
            """
        ),
        encoding="utf-8",
    )
    done = gangplan_limited("convert", "k8s", str(dump), "-o", str(tmp_path / "out.yaml"))
    assert done.returncode == 0, done.stderr
    assert (
        f"{dump}#0: not valid YAML at line 1 column 1: the document contains excessive aliasing"
    ) in done.stderr
    assert "wrote " in done.stderr and ": 1 nodes," in done.stderr


# --------------------------------------------------------------------------- input size


@pytest.mark.parametrize("command", [["validate"], ["convert", "k8s"], ["verify", "x.yaml"]])
def test_a_device_that_never_ends_is_refused_at_once(
    command: list[str], gangplan_limited: Limited, tmp_path: Path
) -> None:
    # before: validate and convert k8s read /dev/zero until MemoryError; now the first NUL
    # byte ends the read. (verify reads the instance x.yaml first: give it a valid one.)
    (tmp_path / "x.yaml").write_text(HEAD, encoding="utf-8")
    done = gangplan_limited(*command, "/dev/zero", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert (
        "error: /dev/zero: not text: a NUL byte at byte 0 (a binary file, or a device such "
        "as /dev/zero?)"
    ) in done.stderr


def test_a_file_past_the_input_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the bound lowered to 100 bytes for the test (1 GiB by default): a 101-byte file
    inst = tmp_path / "big.yaml"
    inst.write_text(HEAD + "# " + "x" * (100 - len(HEAD) - 3) + "\n", encoding="utf-8")
    assert inst.stat().st_size == 100
    monkeypatch.setenv("GANGPLAN_MAX_INPUT_BYTES", "100")
    assert run("validate", str(inst)).exit_code == 0
    inst.write_text(inst.read_text() + "\n", encoding="utf-8")
    assert assert_user_error(run("validate", str(inst))) == [
        f"error: {inst}: larger than 100 bytes, the most gangplan reads from one file (set "
        "GANGPLAN_MAX_INPUT_BYTES to read more)"
    ]
    monkeypatch.setenv("GANGPLAN_MAX_INPUT_BYTES", "1e9")
    assert assert_user_error(run("validate", str(inst))) == [
        "error: GANGPLAN_MAX_INPUT_BYTES: is '1e9'; accepted: a positive number of bytes"
    ]


def test_bytes_that_are_not_utf8_are_refused_with_the_offset(tmp_path: Path) -> None:
    inst = tmp_path / "latin1.yaml"
    inst.write_bytes(HEAD.encode() + b"metadata: {name: caf\xe9}\n")
    # the byte 0xe9 is at len(HEAD) + len("metadata: {name: caf")
    at = len(HEAD) + 20
    assert assert_user_error(run("validate", str(inst))) == [
        f"error: {inst}: not UTF-8 text: invalid continuation byte at byte {at}"
    ]


def test_a_fat_tree_past_the_node_bound_is_refused_before_it_is_built() -> None:
    # before: 10^9 spines x 4 x 8 node names were built (never ended, then MemoryError)
    result = run("generate", "fat-tree", "--spines", "1000000000")
    assert assert_user_error(result) == [
        "error: generate fat-tree: 32,000,000,000 nodes: more than gangplan accepts (at most "
        "100,000 nodes in a snapshot, MAX_NODES in gangplan.models.limits)"
    ]


def test_a_demand_past_the_pod_bound_is_refused_before_it_is_drawn() -> None:
    # 100,000 hgx8 nodes (2 x 50 x 1,000) hold 800,000 GPUs; at load 0 and demand 100 the
    # gangs would ask 80,000,000 GPUs: at least 10,000,000 pods of at most 8 GPUs each
    result = run(
        "generate", "fat-tree", "--spines", "2", "--leaves-per-spine", "50",
        "--nodes-per-leaf", "1000", "--load", "0", "--demand", "100",
    )  # fmt: skip
    assert assert_user_error(result) == [
        "error: generate fat-tree: demand 100 x 800,000 free GPUs needs at least 10,000,000 "
        "pods of at most 8 GPUs: more than gangplan accepts (at most 1,000,000 pods in a "
        "snapshot, MAX_PODS in gangplan.models.limits)"
    ]
