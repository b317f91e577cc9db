"""Tests for trglab.flowchart and trglab.flowchart_service (the offline mermaid.ink service).

The service runs on a free port of its own so that a build's service (port 3377)
is neither reused nor stopped by the tests. Skipped, with the reason, only when
node, mermaid_server/node_modules or chromium is missing.
"""

import os
import socket
import subprocess
import sys
import time

import pytest

from trglab import flowchart, flowchart_service as svc

TRG_STEP = """flowchart LR
    T["张量 T[u,l,d,r]"] -->|归一化| S1["SVD 分解 (u,l)|(d,r)"]
    T --> S2["SVD 分解 (l,d)|(r,u)"]
    S1 -->|保留 k 个奇异值| C["收缩四个半张量"]
    S2 --> C
    C --> N["新张量 T′"]
"""
TRG_LABELS = ["张量 T[u,l,d,r]", "归一化", "SVD 分解 (u,l)|(d,r)", "保留 k 个奇异值", "收缩四个半张量", "新张量 T′"]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def service():
    problem = svc.missing_prerequisite()
    if problem:
        pytest.skip(problem)
    port = _free_port()
    res = svc.start(port, timeout=90)
    old = os.environ.get("MERMAID_INK_SERVER")
    os.environ["MERMAID_INK_SERVER"] = res.url
    try:
        yield res
    finally:
        if old is None:
            os.environ.pop("MERMAID_INK_SERVER", None)
        else:
            os.environ["MERMAID_INK_SERVER"] = old
        svc.stop(port)
        _forget(port)


def _forget(port):
    for path in (svc.log_file(port), svc.state_dir() / f"flowchart-service-{port}.lock"):
        path.unlink(missing_ok=True)


def test_start_reports_a_fresh_healthy_service(service):
    assert not service.reused
    assert service.url == f"http://127.0.0.1:{service.info['port']}"
    assert service.info["service"] == "trglab-mermaid" and service.info["ok"]
    assert service.info["mermaid"].startswith("11.")


def test_render_svg_has_chinese_labels_as_text(service):
    svg = flowchart.render_svg(TRG_STEP, "trg_step")
    assert svg.lstrip().startswith("<svg")
    assert "foreignObject" not in svg  # htmlLabels false: plain <text>, no HTML
    got = flowchart.labels(svg)
    for label in TRG_LABELS:
        assert label in got, (label, got)


def test_render_svg_renames_the_svg_id(service):
    a = flowchart.render_svg(TRG_STEP, "first")
    b = flowchart.render_svg(TRG_STEP, "second")
    assert 'id="trglab-fc-first"' in a and "#trglab-fc-first" in a
    assert 'id="trglab-fc-second"' in b and "trglab-fc-first" not in b
    assert "mermaid-" not in a.split(">", 1)[0]


def test_flowchart_display_object_puts_svg_in_html(service):
    chart = flowchart.show(TRG_STEP, "trg_step")
    html = chart._repr_html_()
    assert html.startswith('<div class="trglab-flowchart" id="flowchart-trg_step"')
    assert "<svg" in html and "收缩四个半张量" in html
    assert "收缩四个半张量" in repr(chart)


def test_png_has_ink(service):
    import base64
    import io

    import requests

    b64 = base64.urlsafe_b64encode(TRG_STEP.encode()).decode()
    r = requests.get(f"{service.url}/img/{b64}?format=png", timeout=30)
    assert r.status_code == 200 and r.headers["Content-Type"] == "image/png"
    assert r.content[:8] == b"\x89PNG\r\n\x1a\n"
    from matplotlib.image import imread

    img = imread(io.BytesIO(r.content), format="png")
    assert img.shape[0] > 50 and img.shape[1] > 200
    assert (img[..., :3].min(axis=2) < 0.5).mean() > 0.005  # dark pixels: text and lines were drawn


def test_pako_encoding_and_bad_input(service):
    import base64
    import zlib

    import requests

    src = 'flowchart TD\n  A["压缩编码"] --> B'
    pako = base64.urlsafe_b64encode(zlib.compress(src.encode())).decode()
    r = requests.get(f"{service.url}/svg/pako:{pako}", timeout=30)
    assert r.status_code == 200 and "压缩编码" in flowchart.labels(r.text)
    assert requests.get(f"{service.url}/svg/%%%", timeout=30).status_code == 400
    bad = base64.urlsafe_b64encode(b"flowchart LR\n A --> (((").decode()
    r = requests.get(f"{service.url}/svg/{bad}", timeout=30)
    assert r.status_code == 400 and "syntax" in r.text


def test_syntax_error_is_a_one_line_flowchart_error(service):
    with pytest.raises(flowchart.FlowchartError) as info:
        flowchart.render_svg("flowchart LR\n A --> (((", "broken")
    assert "\n" not in str(info.value) and "broken" in str(info.value)


def test_second_start_reuses_the_running_service(service):
    port = service.info["port"]
    again = svc.start(port, timeout=10)
    assert again.reused and again.pid == service.pid
    assert again.seconds < 5
    out = subprocess.run([sys.executable, "-m", "trglab.flowchart_service", "start", "--port", str(port)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == service.url
    assert "reusing" in out.stderr
    assert svc.status(port)["pid"] == service.pid


def test_stop_with_owner_keeps_a_service_others_still_use():
    problem = svc.missing_prerequisite()
    if problem:
        pytest.skip(problem)
    dead = str(_dead_pid())  # the pid of a build that crashed without stop
    port = _free_port()
    try:
        assert not svc.start(port, timeout=90, owner="build-a").reused
        assert svc.start(port, timeout=10, owner=dead).reused
        assert svc.start(port, timeout=10, owner="build-b").reused
        assert svc.stop(port, owner="build-a") is False
        assert svc.status(port) is not None
        assert svc.live_owners(port) == ["build-b"]
        assert svc.stop(port, owner="build-b") is True
        assert svc.status(port) is None and not svc.lease_dir(port).exists()
    finally:
        svc.stop(port)
        _forget(port)


def _dead_pid():
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_status_and_stop_of_a_port_with_nothing():
    port = _free_port()
    assert svc.status(port) is None
    assert svc.stop(port) is False
    out = subprocess.run([sys.executable, "-m", "trglab.flowchart_service", "status", "--port", str(port)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 3 and "not running" in out.stdout
    _forget(port)


def test_missing_node_modules_says_run_make_venv(monkeypatch, tmp_path):
    monkeypatch.setattr(svc, "server_dir", lambda: tmp_path)
    problem = svc.missing_prerequisite()
    if problem and "node is not on PATH" in problem:
        pytest.skip(problem)
    assert "node_modules" in problem and "make venv" in problem
    port = _free_port()
    with pytest.raises(svc.ServiceError, match="make venv"):
        svc.start(port, timeout=5)
    _forget(port)


def test_chromium_that_dies_gives_one_line_error(monkeypatch):
    monkeypatch.setenv("TRGLAB_CHROMIUM", "/bin/false")
    problem = svc.missing_prerequisite()
    if problem:
        pytest.skip(problem)
    port = _free_port()
    with pytest.raises(svc.ServiceError) as info:
        svc.start(port, timeout=60)
    msg = str(info.value)
    assert "\n" not in msg and "chromium did not start" in msg
    assert svc.status(port) is None and not svc.pid_file(port).exists()
    _forget(port)


def test_bad_port_is_one_line_exit_2():
    out = subprocess.run([sys.executable, "-m", "trglab.flowchart_service", "start", "--port", "99999"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "1..65535" in out.stderr
    out = subprocess.run([sys.executable, "-m", "trglab.flowchart_service", "stop", "--owner", "a b"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "owner" in out.stderr


def test_unreachable_server_raises_flowchart_error(monkeypatch):
    port = _free_port()
    monkeypatch.setenv("MERMAID_INK_SERVER", f"http://127.0.0.1:{port}")
    t0 = time.perf_counter()
    with pytest.raises(flowchart.FlowchartError) as info:
        flowchart.render_svg(TRG_STEP, "trg_step")
    msg = str(info.value)
    assert "\n" not in msg and "not reachable" in msg and "flowchart_service start" in msg
    assert time.perf_counter() - t0 < 10


def test_default_server_url_follows_port_env(monkeypatch):
    monkeypatch.delenv("MERMAID_INK_SERVER", raising=False)
    monkeypatch.setenv("TRGLAB_MERMAID_PORT", "4242")
    assert flowchart.server_url() == "http://127.0.0.1:4242"
    monkeypatch.setenv("TRGLAB_MERMAID_PORT", "nope")
    with pytest.raises(ValueError, match="1..65535"):
        flowchart.server_url()


def test_bad_source_and_name_are_value_errors():
    with pytest.raises(ValueError, match="non-empty"):
        flowchart.render_svg("   ", "x")
    with pytest.raises(ValueError, match="name"):
        flowchart.render_svg("flowchart LR\n A --> B", "has space")


def test_labels_joins_tspans_and_skips_empty_text():
    svg = ('<svg id="x"><style>#x text{fill:red}</style><text><tspan>输入</tspan><tspan> T</tspan></text>'
           '<text><tspan></tspan></text><g><text>SVD &amp; 分解</text></g></svg>')
    assert flowchart.labels(svg) == ["输入 T", "SVD & 分解"]
