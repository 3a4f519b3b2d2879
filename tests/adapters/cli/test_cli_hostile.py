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
SIMULATE = ["simulate", "trace.csv", "--cluster", "cluster.yaml"]


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
        # simulate: a billion runs, a billion worker processes (forked at once), a CP-SAT
        # budget of 100,000 days per cycle
        ([*SIMULATE, "--seeds", "1000000000"], "1000000000 is not in the range 1<=x<=1000"),
        ([*SIMULATE, "--workers", "1000000000"], "1000000000 is not in the range 1<=x<=256"),
        ([*SIMULATE, "--time-limit", "100000d"], "accepted a time > 0 and at most 1d"),
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


@pytest.mark.slow  # a child (about 6 s); the instance's bomb above stays in the default run
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
    ) in " ".join(done.stderr.split())  # wrapped at 80 columns
    assert "wrote " in done.stderr and ": 1 node," in " ".join(done.stderr.split())


# --------------------------------------------------------------------------- input size


@pytest.mark.parametrize(
    "command",
    [
        ["validate"],
        # a child each (5-8 s): validate stays in the default run, the others are slow
        pytest.param(["convert", "k8s"], marks=pytest.mark.slow),
        pytest.param(["verify", "x.yaml"], marks=pytest.mark.slow),
        # the trace's header was sniffed with readline(): all of /dev/zero
        pytest.param(["simulate", "--cluster", "x.yaml"], marks=pytest.mark.slow),
        pytest.param(["serve", "--once", "--config"], marks=pytest.mark.slow),
    ],
)
def test_a_device_that_never_ends_is_refused_at_once(
    command: list[str], gangplan_limited: Limited, tmp_path: Path
) -> None:
    # before: validate and convert k8s read /dev/zero until MemoryError; now the first NUL
    # byte ends the read. (verify and simulate read the instance x.yaml first: a valid one
    # with GPUs, the default instance.)
    default = Path(__file__).resolve().parents[3] / "instances" / "default.yaml"
    (tmp_path / "x.yaml").write_bytes(default.read_bytes())
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


# --------------------------------------------------------------------------- outputs

DEFAULT = Path(__file__).resolve().parents[3] / "instances" / "default.yaml"
SOLVE = ["solve", "--placer", "greedy", "--format", "json"]


def instance_file(tmp_path: Path, name: str = "inst.yaml") -> Path:
    inst = tmp_path / name
    inst.write_bytes(DEFAULT.read_bytes())
    return inst


@pytest.mark.parametrize("spelling", ["same", "other", "symlink", "hardlink"])
def test_an_output_that_is_an_input_is_refused(tmp_path: Path, spelling: str) -> None:
    # before: solve inst.yaml -o inst.yaml replaced the instance with its plan
    inst = instance_file(tmp_path)
    out = {
        "same": inst,
        "other": tmp_path / "sub" / ".." / "inst.yaml",  # another spelling of the same path
        "symlink": tmp_path / "link.yaml",
        "hardlink": tmp_path / "hard.yaml",
    }[spelling]
    (tmp_path / "sub").mkdir()
    if spelling == "symlink":
        out.symlink_to(inst)
    elif spelling == "hardlink":
        out.hardlink_to(inst)
    result = run(*SOLVE, str(inst), "-o", str(out))
    what = (
        "is an input of this command"
        if spelling == "same"
        else f"is the same file as the input {inst}"
    )
    assert assert_user_error(result) == [
        f"error: {out}: {what}: it would be replaced; give another output path"
    ]
    assert inst.read_bytes() == DEFAULT.read_bytes()


def test_solve_refuses_its_previous_plan_as_output(tmp_path: Path) -> None:
    inst = instance_file(tmp_path)
    plan = tmp_path / "plan.yaml"
    assert run(*SOLVE, str(inst), "-o", str(plan)).exit_code == 0
    before = plan.read_bytes()
    result = run(*SOLVE, str(inst), "--previous", str(plan), "-o", str(plan))
    assert assert_user_error(result) == [
        f"error: {plan}: is an input of this command: it would be replaced; give another "
        "output path"
    ]
    assert plan.read_bytes() == before


def test_convert_refuses_a_dump_file_or_a_file_in_a_dump_folder(tmp_path: Path) -> None:
    dump = tmp_path / "d.yaml"
    dump.write_text(NODE_DOC, encoding="utf-8")
    assert assert_user_error(run("convert", "k8s", str(dump), "-o", str(dump))) == [
        f"error: {dump}: is an input of this command: it would be replaced; give another "
        "output path"
    ]
    assert dump.read_text() == NODE_DOC
    # a folder: a file inside it that would be read on the next conversion
    assert assert_user_error(run("convert", "k8s", str(tmp_path), "-o", str(dump))) == [
        f"error: {dump}: is inside the input folder {tmp_path}; give another output path"
    ]


@pytest.mark.parametrize(
    ("args", "held", "writes"),
    [
        # before: schema -o inst.yaml replaced the instance with the JSON Schema
        (["schema"], "instance (kind: Instance)", "other data"),
        # a plan written over an instance: a typo of a path, not a wish
        ([*SOLVE, str(DEFAULT)], "instance (kind: Instance)", "a plan"),
    ],
)
def test_a_gangplan_file_of_another_kind_is_not_replaced(
    tmp_path: Path, args: list[str], held: str, writes: str
) -> None:
    inst = instance_file(tmp_path)
    assert assert_user_error(run(*args, "-o", str(inst))) == [
        f"error: {inst}: holds a gangplan {held}, and this command writes {writes}: it is not "
        "replaced; give another output path, or remove the file first"
    ]
    assert inst.read_bytes() == DEFAULT.read_bytes()


def test_a_file_of_the_same_kind_is_replaced_atomically_keeping_its_mode(
    tmp_path: Path,
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("apiVersion: gangplan.io/v1alpha1\nkind: Plan\ngangs: []\n")
    plan.chmod(0o640)
    assert run(*SOLVE, str(DEFAULT), "-o", str(plan)).exit_code == 0
    assert plan.stat().st_mode & 0o777 == 0o640
    assert "kind: Plan" in plan.read_text() and "gang: llm-pretrain" in plan.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.yaml"]  # no temporary left


def test_a_new_file_gets_the_mode_open_would_give(tmp_path: Path) -> None:
    import os

    mask = os.umask(0o027)
    try:
        assert run("schema", "-o", str(tmp_path / "s.json")).exit_code == 0
    finally:
        os.umask(mask)
    assert (tmp_path / "s.json").stat().st_mode & 0o777 == 0o640  # 0o666 & ~0o027


def test_a_failed_write_leaves_the_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import os

    plan = tmp_path / "plan.yaml"
    plan.write_text("apiVersion: gangplan.io/v1alpha1\nkind: Plan\ngangs: []\n")
    before = plan.read_bytes()

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    result = run(*SOLVE, str(DEFAULT), "-o", str(plan))
    assert assert_user_error(result) == [f"error: {plan}: cannot write: No space left on device"]
    assert plan.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.yaml"]


def test_a_symlink_is_written_through(tmp_path: Path) -> None:
    # before: the link was replaced by a regular file; now the file it points to is
    target = tmp_path / "real" / "s.json"
    target.parent.mkdir()
    target.write_text("{}\n")
    link = tmp_path / "s.json"
    link.symlink_to(target)
    assert run("schema", "-o", str(link)).exit_code == 0
    assert link.is_symlink()
    assert '"$defs"' in target.read_text()


def _device(tmp_path: Path, name: str, minor: int) -> Path:
    """A private copy of /dev/null (minor 3) or /dev/full (minor 7): the tests never write to
    the machine's own (before the fix, as root, -o replaced them by regular files)."""
    import os
    import stat

    path = tmp_path / name
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    except (OSError, AttributeError) as err:
        pytest.skip(f"cannot make a device node here ({err})")
    return path


def test_a_character_device_is_written_as_a_stream(tmp_path: Path) -> None:
    import stat

    null = _device(tmp_path, "null", 3)
    assert run(*SOLVE, str(DEFAULT), "-o", str(null)).exit_code == 0
    assert stat.S_ISCHR(null.stat().st_mode)  # still the device
    full = _device(tmp_path, "full", 7)
    assert assert_user_error(run("schema", "-o", str(full))) == [
        f"error: {full}: cannot write: No space left on device"
    ]
    assert stat.S_ISCHR(full.stat().st_mode)


def test_a_fifo_gets_everything(tmp_path: Path) -> None:
    # before: the FIFO was replaced by a regular file and its reader got nothing. The reader
    # opens first (without waiting for a writer); the schema (about 30 KB) fits the pipe's
    # buffer (64 KiB on Linux), so no thread is needed, and nothing hangs either way.
    import os
    import stat

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        result = run("schema", "-o", str(fifo))
        assert result.exit_code == 0, result.output
        got = b""
        while chunk := _read_some(fd):
            got += chunk
    finally:
        os.close(fd)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert got == run("schema").stdout.encode()


def _read_some(fd: int) -> bytes:
    import os

    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:  # no writer ever came: nothing to read
        return b""


def test_dash_is_standard_output() -> None:
    result = run("schema", "-o", "-")
    assert result.exit_code == 0
    assert result.stdout == run("schema").stdout  # the schema alone, no "wrote" line


# --------------------------------------------------------------------------- duplicate keys, BOM

NODE_DOC = (
    "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
    "status: {allocatable: {cpu: '4', pods: '110'}}\n"
)


def test_duplicate_keys_in_an_instance_name_both_lines(tmp_path: Path) -> None:
    # before: the second gangs: replaced the first, and gang a disappeared silently
    inst = tmp_path / "dup.yaml"
    inst.write_text(
        HEAD
        + "nodes: [{name: n1, allocatable: {cpu: 4}}]\nqueues: [{name: q}]\n"
        + "gangs: [{name: a, queue: q, roles: [{name: w, count: 1}]}]\n"
        + "gangs: [{name: b, queue: q, roles: [{name: w, count: 1}]}]\n",
        encoding="utf-8",
    )
    assert assert_user_error(run("validate", str(inst))) == [
        f"error: {inst}: line 6 column 1: not valid YAML: mapping key 'gangs' already "
        "defined at line 5"
    ]


def test_duplicate_keys_in_a_plan_name_both_lines(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "apiVersion: gangplan.io/v1alpha1\nkind: Plan\ngangs: []\npods: []\ngangs: []\n"
    )
    assert assert_user_error(run("verify", str(DEFAULT), str(plan))) == [
        f"error: {plan}: line 5 column 1: not valid YAML: mapping key 'gangs' already "
        "defined at line 3"
    ]


def test_a_duplicate_key_in_a_dump_drops_that_document(tmp_path: Path) -> None:
    # before: nvidia.com/gpu: 8 then nvidia.com/gpu: 1 read as 1 GPU silently
    dump = tmp_path / "d.yaml"
    dump.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n0}\nstatus:\n  allocatable:\n"
        "    nvidia.com/gpu: 8\n    cpu: '4'\n    nvidia.com/gpu: 1\n---\n" + NODE_DOC,
        encoding="utf-8",
    )
    out = tmp_path / "out.yaml"
    result = run("convert", "k8s", str(dump), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert (
        f"{dump}#0: not valid YAML at line 8 column 5: mapping key 'nvidia.com/gpu' already "
        "defined at line 6"
    ) in " ".join(result.stderr.split())  # wrapped at 80 columns
    assert f"wrote {out}: 1 node, 0 GPUs," in " ".join(result.stderr.split())  # n1, the next


def test_a_json_dump_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    # before: "not valid JSON: Unexpected UTF-8 BOM", an empty instance, and exit 0
    dump = tmp_path / "d.json"
    node = '{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {}}'
    dump.write_bytes(
        b"\xef\xbb\xbf" + f'{{"apiVersion": "v1", "kind": "List", "items": [{node}]}}'.encode()
    )
    result = run("convert", "k8s", str(dump))
    assert result.exit_code == 0, result.output
    assert "instance: 1 node," in result.stderr


@pytest.mark.parametrize(
    ("text", "why"),
    [
        # an empty file
        ("", "the dump holds no object"),
        # objects gangplan does not read
        (
            "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
            "not one object of a kind gangplan reads (1 not read, listed above)",
        ),
        # one Pod without spec: parsed, then refused by the conversion; before, "read: 1
        # Pod", an empty instance written and exit 0
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p1, namespace: default}\n",
            "not one object could be converted (1 not read, listed above)",
        ),
    ],
)
def test_nothing_read_is_an_error_and_writes_nothing(tmp_path: Path, text: str, why: str) -> None:
    dump = tmp_path / "d.yaml"
    dump.write_text(text, encoding="utf-8")
    out = tmp_path / "out.yaml"
    result = run("convert", "k8s", str(dump), "-o", str(out))
    assert assert_user_error(result) == [f"error: {dump}: nothing read: {why}; no instance written"]
    assert not out.exists()


def test_a_duplicate_key_in_the_serve_configuration_names_both_lines(tmp_path: Path) -> None:
    cfg = tmp_path / "serve.yaml"
    cfg.write_text("period_s: 1\nperiod_s: 2\n", encoding="utf-8")
    assert assert_user_error(run("serve", "--once", "--config", str(cfg))) == [
        f"error: {cfg}: line 2 column 1: not YAML: mapping key 'period_s' already defined at line 1"
    ]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        # the breaker's file, on one line: before, the first "queues" was dropped silently
        (
            '{"apiVersion": "gangplan.io/v1alpha1", "kind": "Instance", '
            '"queues": [{"name": "q"}], "queues": []}',
            "line 1",
        ),
        # the same over four lines: both lines named
        (
            '{"apiVersion": "gangplan.io/v1alpha1",\n "kind": "Instance",\n'
            ' "queues": [{"name": "q"}],\n "queues": []}\n',
            "lines 3 and 4",
        ),
    ],
    ids=["one-line", "four-lines"],
)
def test_a_duplicate_key_in_a_json_instance_is_refused(
    tmp_path: Path, text: str, where: str
) -> None:
    f = tmp_path / "dup.json"
    f.write_text(text, encoding="utf-8")
    assert assert_user_error(run("validate", str(f))) == [
        f"error: {f}: {where}: not valid JSON: duplicate key 'queues' (members 3 and 4 of the "
        "object with keys 'apiVersion', 'kind', 'queues')"
    ]


@pytest.mark.slow  # the default instance solved before the write: about 9 s
@pytest.mark.skipif(not Path("/proc/version").is_file(), reason="needs Linux's /proc")
def test_writing_over_a_proc_file_says_why(tmp_path: Path) -> None:
    # before: "cannot write: No such file or directory" for a file that exists
    errors = assert_user_error(run("solve", "-o", "/proc/version"))
    assert errors == [
        "error: /proc/version: cannot write: no new file can be made in /proc to replace it "
        "(No such file or directory); the file is left as it was"
    ]


def test_a_dash_is_not_standard_input_for_solve() -> None:
    # before: "-: no such file", while the docs spoke of standard input
    assert assert_user_error(run("solve", "-")) == [
        "error: -: no such file (this command reads files, not standard input)"
    ]


def test_a_device_layout_file_that_is_no_mapping_names_no_empty_field(tmp_path: Path) -> None:
    # before: "error: layout.txt: : Input should be ..." (an empty field path)
    layout = tmp_path / "layout.txt"
    layout.write_text("root:x:0:0:root:/root:/bin/bash\n", encoding="utf-8")
    dump = tmp_path / "d.yaml"
    dump.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n", encoding="utf-8")
    errors = assert_user_error(run("convert", "k8s", str(dump), "--device-layout", str(layout)))
    assert errors == [
        f"error: {layout}: Input should be a valid dictionary or instance of DeviceLayout "
        "(a DeviceLayout: numa_nodes > pcie_switches > gpus, nics)"
    ]


def test_a_date_or_boolean_key_is_named_as_written_with_a_hint(tmp_path: Path) -> None:
    # before: "nodes[0].domains.datetime.date(2024, 1, 1).[key]: should be a string"
    f = tmp_path / "i.yaml"
    f.write_text(
        "apiVersion: gangplan.io/v1alpha1\nkind: Instance\nnodes:\n- name: n0\n"
        "  allocatable: {cpu: 1}\n  domains: {2024-01-01: x, yes: y}\n",
        encoding="utf-8",
    )
    errors = assert_user_error(run("validate", str(f)))
    assert (
        f"error: {f}: nodes[0].domains: key 2024-01-01: YAML reads it as a date, not a string; "
        "quote it: '2024-01-01'"
    ) in errors
    assert (
        f"error: {f}: nodes[0].domains: key true: YAML reads it as a boolean, not a string; "
        "quote it as written (e.g. 'yes', 'on')"
    ) in errors


DEVICE = """\
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Device
metadata: {name: host04}
spec:
  devices:
  - {type: gpu, minor: 0, health: true, resources: {nvidia.com/gpu: "1"}}
"""


def test_objects_read_but_all_dropped_are_an_error_and_write_nothing(tmp_path: Path) -> None:
    # before: "read: 1 Device...", the Device dropped (its Node is not in the dump), then an
    # instance of 0 nodes written and exit 0
    dump = tmp_path / "d.yaml"
    dump.write_text(DEVICE, encoding="utf-8")
    out = tmp_path / "out.yaml"
    result = run("convert", "k8s", str(dump), "-o", str(out))
    assert assert_user_error(result) == [
        f"error: {dump}: nothing read: not one object could be converted (1 not read, listed "
        "above); no instance written"
    ]
    assert "no Node 'host04' in the dump" in result.stderr
    assert not out.exists()


def test_queues_without_nodes_are_written_with_a_warning(tmp_path: Path) -> None:
    dump = tmp_path / "d.yaml"
    dump.write_text(
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: team-a}\n"
        "spec: {weight: 2}\n",
        encoding="utf-8",
    )
    result = run("convert", "k8s", str(dump))
    assert result.exit_code == 0, result.output
    assert (
        "warning: the dump has no Node: the instance has no nodes (a dump without "
        "`kubectl get nodes`?)" in " ".join(result.stderr.split())
    )


def test_convert_s_summary_is_wrapped_at_80_columns(tmp_path: Path) -> None:
    # before: "read: ..." on one line however many kinds, examples up to 262 columns, and
    # "4 -: not a Kubernetes object" for documents that are no object
    dump = tmp_path / "d.yaml"
    kinds = [f"Kind{i:02d}" for i in range(12)]
    docs = [f"apiVersion: example.com/v1\nkind: {k}\nmetadata: {{name: x}}\n" for k in kinds]
    docs += ["just a string\n", "- a list\n"]
    node = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {}\n"
    dump.write_text("---\n".join([node, *docs]), encoding="utf-8")
    result = run("convert", "k8s", str(dump))
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    # every line fits, or holds one word alone that is longer (a path is never broken)
    assert [t for t in lines if len(t) > 80 and len(t.split()) > 1] == []
    assert lines[0].startswith("read: 12 Kind00.example.com") is False  # not read: listed
    read = [t for t in lines if t.startswith("read: ")]
    assert read == ["read: 1 Node"]
    assert "      2 documents: not a Kubernetes object" in lines
    assert not any(" -: " in t for t in lines)
