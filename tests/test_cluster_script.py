"""``scripts/cluster.py``'s pure parts and the ``deploy/`` files, without starting a cluster.

The two-writers checker (lease intervals, their overlaps, epochs), the loss accounting by
replication window, the HAProxy config made from ``deploy/haproxy.cfg`` (checked by
``haproxy -c``; ``make test`` installs Debian's haproxy when missing), and that the node
configs the script and the compose file use pass the proxy's own validation.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from proxy.config import load_config

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
HAPROXY = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/usr/local/sbin")


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The script as a module (it imports its siblings as top-level modules)."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    return importlib.import_module("cluster")


def _event(cluster: ModuleType, ts: float, node: str, action: str, epoch: int = 1,
           tenant: str = "t00") -> Any:
    return cluster.LeaseEvent(ts, node, tenant, epoch, action)


# --- the two-writers check ------------------------------------------------------------------


def test_a_clean_takeover_after_a_kill_is_no_overlap(cluster: ModuleType) -> None:
    events = [_event(cluster, 10, "node-1", "acquired", 1),
              _event(cluster, 11, "node-1", "renewed", 1),
              _event(cluster, 19, "node-2", "acquired", 2)]
    spans = cluster.holdings(events, {"node-1": 14.0}, 30.0)
    assert [(h.node, h.start, h.end, h.until) for h in spans] == [
        ("node-1", 10, 14.0, "killed"), ("node-2", 19, 30.0, "end")]
    assert cluster.overlaps(spans) == []
    assert cluster.epoch_problems(events) == []


def test_a_second_holder_before_the_first_lets_go_is_an_overlap(cluster: ModuleType) -> None:
    events = [_event(cluster, 10, "node-1", "acquired", 1),
              _event(cluster, 15, "node-2", "acquired", 2),
              _event(cluster, 17, "node-1", "lost", 1)]
    [overlap] = cluster.overlaps(cluster.holdings(events, {}, 30.0))
    assert (overlap.tenant, overlap.first, overlap.second) == ("t00", "node-1", "node-2")
    assert overlap.start == 15 and overlap.seconds == pytest.approx(2.0)


def test_release_then_acquire_elsewhere_touching_is_no_overlap(cluster: ModuleType) -> None:
    events = [_event(cluster, 1, "node-1", "acquired", 1),
              _event(cluster, 5, "node-1", "released", 1),
              _event(cluster, 5, "node-2", "acquired", 2),
              _event(cluster, 9, "node-2", "released", 2),
              _event(cluster, 12, "node-1", "acquired", 3)]
    spans = cluster.holdings(events, {}, 20.0)
    assert [(h.node, h.start, h.end) for h in spans] == [
        ("node-1", 1, 5), ("node-1", 12, 20.0), ("node-2", 5, 9)]
    assert cluster.overlaps(spans) == []
    assert cluster.epoch_problems(events) == []


def test_tenants_are_checked_apart(cluster: ModuleType) -> None:
    events = [_event(cluster, 1, "node-1", "acquired", 1, "t00"),
              _event(cluster, 2, "node-2", "acquired", 1, "t01")]
    assert cluster.overlaps(cluster.holdings(events, {}, 10.0)) == []


def test_a_renewal_without_its_acquisition_opens_a_holding(cluster: ModuleType) -> None:
    """A log that begins mid-holding still counts the holding."""
    events = [_event(cluster, 3, "node-1", "renewed", 4),
              _event(cluster, 4, "node-2", "acquired", 5)]
    assert len(cluster.overlaps(cluster.holdings(events, {}, 10.0))) == 1


def test_epochs_must_only_increase(cluster: ModuleType) -> None:
    events = [_event(cluster, 1, "node-1", "acquired", 3),
              _event(cluster, 2, "node-1", "released", 3),
              _event(cluster, 3, "node-2", "acquired", 3),
              _event(cluster, 4, "node-2", "renewed", 2)]
    problems = cluster.epoch_problems(events)
    assert len(problems) == 2
    assert "acquired epoch 3 after node-1 had epoch 3" in problems[0]
    assert "renewed epoch 2 holding 3" in problems[1]


def test_lease_lines_are_read_from_a_node_log(cluster: ModuleType) -> None:
    lines = ['{"event": "chat", "tenant": "t00"}', "not json",
             '{"ts": "2026-12-02T08:30:00.500Z", "event": "lease", "tenant": "t00", '
             '"node": "node-2", "epoch": 7, "action": "acquired", "at": 12.5}',
             '{"event": "lease", "tenant": "t01", "node": "node-2", "epoch": 1, '
             '"action": "released", "ts": "2026-12-02T08:30:00.500Z"}',
             '{"event": "lease", "tenant": "t00"}']
    assert cluster.lease_events(lines, "node-2") == [
        cluster.LeaseEvent(12.5, "node-2", "t00", 7, "acquired"),
        cluster.LeaseEvent(1796200200.5, "node-2", "t01", 1, "released")]


def test_interleaved_answers_from_two_nodes_are_found(cluster: ModuleType) -> None:
    def x(node: str, at: float) -> Any:
        return cluster.Exchange("t00", 1, "t00q00001", node, at, True, 1.0)

    clean = [x("node-1", 1), x("node-1", 2), x("node-2", 6), x("node-2", 7)]
    assert cluster.overlaps(cluster.answer_spans(clean)) == []
    mixed = [x("node-1", 1), x("node-2", 2), x("node-1", 3)]
    assert len(cluster.overlaps(cluster.answer_spans(mixed), closed=True)) == 1
    assert cluster.overlaps(cluster.answer_spans(mixed)) == []


# --- loss accounting -------------------------------------------------------------------------


def test_losses_are_split_by_the_replication_window(cluster: ModuleType) -> None:
    def x(n: int, node: str, at: float, answered: bool = True) -> Any:
        return cluster.Exchange("t00", n, f"t00q{n:05d}", node, at, answered, 1.0)

    exchanges = [x(1, "node-1", 90.0), x(2, "node-1", 97.0), x(3, "node-1", 99.5),
                 x(4, "node-2", 105.0), x(5, "node-2", 106.0), x(6, "node-1", 99.9, False)]
    stored = {"t00": {"t00q00001", "t00q00004"}}
    losses = cluster.classify_losses(exchanges, stored, killed="node-1", kill_at=100.0,
                                     interval_s=1.0)
    assert (losses.answered, losses.stored, losses.lost) == (5, 2, 3)
    assert [e.n for e in losses.before_interval] == [2]
    assert [e.n for e in losses.within_interval] == [3]
    assert [e.n for e in losses.live] == [5]


def test_facts_carry_one_searchable_marker(cluster: ModuleType) -> None:
    marker, text = cluster.fact("t03", 17)
    assert marker == "t03q00017" and text.startswith("Fact t03-17: ")
    turns = [("c", "user", text), ("c", "assistant", f"echo: {text}"), ("c", "user", "hi"),
             ("p", "user", "What do you remember about the parcel t03q00002?"),
             ("p", "assistant", "echo: Fact t03-3: the parcel t03q00003 is kept in Oslo.")]
    assert cluster.markers_in(turns) == {"t03q00017"}


def test_a_receipt_counts_only_the_fact_itself(cluster: ModuleType) -> None:
    _, text = cluster.fact("t01", 2)
    probe = {"text": "What do you remember about the parcel t01q00002?"}
    assert cluster.recalled({"area": {"fragments": [{"text": text}]}}, "t01", {"t01q00002"})
    assert not cluster.recalled({"area": {"fragments": [probe]}}, "t01", {"t01q00002"})
    assert not cluster.recalled({"area": {"fragments": [{"text": text}]}}, "t01", {"t01q00009"})
    assert not cluster.recalled({}, "t01", {"t01q00002"})


def test_placement_and_the_busiest_node(cluster: ModuleType) -> None:
    def x(tenant: str, node: str, at: float) -> Any:
        return cluster.Exchange(tenant, 1, "m", node, at, True, 1.0)

    where = cluster.placement([x("t00", "node-1", 1), x("t00", "node-2", 2),
                               x("t01", "node-2", 1), x("t02", "node-3", 1)])
    assert where == {"t00": "node-2", "t01": "node-2", "t02": "node-3"}
    assert cluster.busiest(where) == "node-2"
    assert cluster.busiest({}) is None


def test_every_tenant_gets_a_client_and_keys_alternate_headers(cluster: ModuleType) -> None:
    tenants = cluster.tenant_names(5)
    for clients in (1, 2, 5, 50):
        shares = cluster.assignments(tenants, clients)
        assert len(shares) == clients
        assert {t for share in shares for t in share} == set(tenants)
    assert cluster.key_headers("t00", 2) == {"Authorization": "Bearer sk-cluster-t00"}
    assert cluster.key_headers("t00", 3) == {"x-api-key": "sk-cluster-t00"}


# --- HAProxy ---------------------------------------------------------------------------------


def _local_config(cluster: ModuleType, nodes: int = 4) -> str:
    servers = [(f"node-{i}", f"127.0.0.1:{9000 + i}") for i in range(1, nodes + 1)]
    return str(cluster.haproxy_config((DEPLOY / "haproxy.cfg").read_text(),
                                      bind="127.0.0.1:18080", stats_bind="127.0.0.1:18404",
                                      servers=servers))


def test_the_local_haproxy_config_keeps_the_balance_rules(cluster: ModuleType) -> None:
    template = (DEPLOY / "haproxy.cfg").read_text()
    local = _local_config(cluster)
    for rule in ("balance hash var(txn.proxy_key)", "hash-type consistent",
                 "http-check send meth GET uri /readyz", "option http-no-delay",
                 "no option redispatch",
                 "http-response set-header X-Served-By %[srv_name]", "timeout server 600s"):
        assert rule in template and rule in local
    servers = [line.split() for line in local.splitlines() if line.strip().startswith("server ")]
    assert [s[1:5] for s in servers] == [[f"node-{i}", f"127.0.0.1:{9000 + i}", "id", str(i)]
                                         for i in range(1, 5)]
    assert all("resolvers" not in s and "init-addr" not in s for s in servers)
    assert "resolvers docker" not in local and "bind 127.0.0.1:18080" in local
    assert "bind 127.0.0.1:18404" in local and "bind :8080" not in local


def test_a_template_without_servers_is_refused(cluster: ModuleType) -> None:
    with pytest.raises(ValueError, match="no server line"):
        cluster.haproxy_config("backend areamem_nodes\n    balance roundrobin\n",
                               bind="127.0.0.1:1", stats_bind="127.0.0.1:2", servers=[])


@pytest.mark.parametrize("which", ["deploy", "local"])
def test_haproxy_accepts_the_configs(cluster: ModuleType, tmp_path: Path, which: str) -> None:
    path = DEPLOY / "haproxy.cfg"
    if which == "local":
        path = tmp_path / "haproxy.cfg"
        path.write_text(_local_config(cluster))
    assert HAPROXY is not None, "haproxy is not installed: make haproxy (apt-get install haproxy)"
    result = subprocess.run([HAPROXY, "-c", "-f", str(path)], capture_output=True, text=True,
                            check=False, timeout=30)
    assert result.returncode == 0, result.stderr


# --- node configs ----------------------------------------------------------------------------


def test_the_scripts_node_config_is_valid(cluster: ModuleType, tmp_path: Path) -> None:
    document = cluster.node_document("node-2", 18787, tmp_path / "node-2",
                                     "http://127.0.0.1:9100/v1", ["t00", "t01"],
                                     tmp_path / "replica", cluster.Timings(), "bm25")
    path = tmp_path / "node.yaml"
    path.write_text(yaml.safe_dump(document))
    config = load_config(path)
    assert config.auth.keys == {"sk-cluster-t00": "t00", "sk-cluster-t01": "t01"}
    assert config.cluster is not None and config.cluster.node == "node-2"
    assert config.cluster.replica == (tmp_path / "replica").as_uri()


def test_the_compose_files_fit_together(tmp_path: Path) -> None:
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    services = compose["services"]
    for i in (1, 2, 3):
        node, sidecar = services[f"node-{i}"], services[f"litestream-{i}"]
        assert f"node-{i}-data:/data" in node["volumes"]
        assert f"node-{i}-data:/data" in sidecar["volumes"]
        socket = f"node-{i}-socket:/run/litestream"
        assert socket in node["volumes"] and socket in sidecar["volumes"]
        assert "leases:/leases" in node["volumes"]
        assert f"s/@NODE@/node-{i}/" in node["command"][2]
    haproxy_cfg = (DEPLOY / "haproxy.cfg").read_text()
    for i in (1, 2, 3):
        assert f"server node-{i} node-{i}:8787" in haproxy_cfg
    litestream = yaml.safe_load((DEPLOY / "litestream.yml").read_text())
    assert litestream["socket"]["path"] == "/run/litestream/litestream.sock"
    node_text = (DEPLOY / "node.yaml").read_text().replace("@NODE@", "node-1")
    path = tmp_path / "node.yaml"
    path.write_text(node_text)
    config = load_config(path)
    assert config.cluster is not None
    assert str(config.cluster.litestream_socket) == litestream["socket"]["path"]
    assert config.cluster.leases == "file:///leases" and config.server.data_dir == Path("/data")


# --- the command line -----------------------------------------------------------------------


def test_a_report_file_that_cannot_be_written_is_refused_before_the_run(
    cluster: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--json`` in a missing folder was found after the whole run (a traceback that lost
    the report); now a usage error (status 2) before any child starts."""
    workdir = tmp_path / "work"
    argv = ["--json", str(tmp_path / "missing" / "out.json"), "--workdir", str(workdir)]
    with pytest.raises(SystemExit) as exit_:
        cluster.main(argv)
    assert exit_.value.code == 2
    assert "does not exist" in capsys.readouterr().err
    assert not workdir.exists()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--seconds", "nan"], "--seconds"),  # ran for ever
        (["--seconds", "inf"], "--seconds"),
        (["--clients", "0"], "--clients"),  # silently became 6
        (["--stream-share", "5"], "--stream-share"),  # ran, and reported a false failure
        (["--stream-share", "nan"], "--stream-share"),
        (["--think-ms", "-1"], "--think-ms"),
        (["--first-token-ms", "inf"], "--first-token-ms"),
        # these were found by the first node, after the upstream and it had started
        (["--lease-ttl-s", "1", "--lease-renew-s", "1"], "at most half of lease_ttl_s"),
        (["--sync-interval-s", "-1"], "--sync-interval-s"),
        (["--idle-release-s", "nan"], "--idle-release-s"),
    ],
)
def test_bad_numbers_are_refused_in_one_line_before_anything_starts(
    cluster: ModuleType,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    says: str,
) -> None:
    workdir = tmp_path / "work"
    assert cluster.main([*argv, "--workdir", str(workdir)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("cluster: ") and says in line
    assert not workdir.exists()


def test_lease_lines_with_numbers_out_of_range_are_skipped(cluster: ModuleType) -> None:
    """An epoch of ``1e400`` raised OverflowError out of the reader (a traceback after the
    whole run); a time of NaN or ``1e400`` sorted the two-writers check at random."""
    bad = ['{"event": "lease", "tenant": "t00", "node": "n", "epoch": 1e400, '
           '"action": "acquired", "at": 1}',
           '{"event": "lease", "tenant": "t00", "node": "n", "epoch": 2, '
           '"action": "acquired", "at": NaN}',
           '{"event": "lease", "tenant": "t00", "node": "n", "epoch": 3, '
           '"action": "acquired", "at": 1e400}',
           '{"event": "lease", "tenant": "t00", "node": "n", "epoch": 2.5, '
           '"action": "acquired", "at": 1}']
    good = '{"event": "lease", "tenant": "t00", "node": "n", "epoch": 4, "action": "lost", "at": 2}'
    expected = [cluster.LeaseEvent(2.0, "n", "t00", 4, "lost")]
    assert cluster.lease_events([*bad, good], "n") == expected
