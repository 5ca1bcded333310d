import hashlib
import http.server
import io
import os
import socket
import threading
import zipfile
from functools import partial

import pytest

from mlflow_recsys.data import DownloadError, download

U_DATA = "7\t3\t5\t881250949\n7\t4\t2\t881250950\n9\t3\t4\t881250951\n"


def make_zip(path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("tiny/u.data", U_DATA)
        zf.writestr("tiny/README", "test archive")
    path.write_bytes(buf.getvalue())
    return hashlib.sha256(buf.getvalue()).hexdigest()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the folder; counts GETs and answers the first ``server.failures_left`` of them with 503."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.server.gets += 1
        if self.server.failures_left > 0:
            self.server.failures_left -= 1
            self.send_error(503, "Service Unavailable")
            return
        super().do_GET()


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    digest = make_zip(root / "tiny.zip")
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(root)))
    httpd.gets, httpd.failures_left = 0, 0
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/tiny.zip"
    try:
        yield httpd, url, digest
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def closed_port_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/tiny.zip"


def test_download_with_good_checksum_places_file_and_reuses_it_offline(server, tmp_path):
    httpd, url, digest = server
    dest = tmp_path / "cache" / "tiny.zip"
    assert download(url, dest, digest, progress=False) == dest
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == digest
    httpd.shutdown()  # a second call must not need the server
    assert download(url, dest, digest.upper(), progress=False) == dest
    assert sorted(p.name for p in dest.parent.iterdir()) == ["tiny.zip"]
    assert httpd.gets == 1


def test_downloaded_file_gets_the_mode_of_a_new_file_not_of_a_temporary_one(server, tmp_path):
    _, url, digest = server
    dest = tmp_path / "tiny.zip"
    download(url, dest, digest, progress=False)
    mask = os.umask(0)
    os.umask(mask)
    assert dest.stat().st_mode & 0o777 == 0o666 & ~mask


def test_a_failed_attempt_is_retried_and_the_retry_places_the_file(server, tmp_path):
    httpd, url, digest = server
    httpd.failures_left = 1
    dest = tmp_path / "cache" / "tiny.zip"
    assert download(url, dest, digest, retries=1, progress=False) == dest
    assert httpd.gets == 2 and hashlib.sha256(dest.read_bytes()).hexdigest() == digest
    assert list(dest.parent.iterdir()) == [dest]


@pytest.mark.parametrize(
    "failures, retries, requests",
    [
        (1, 0, 1),  # without retries one failure is the error
        (5, 1, 2),  # every attempt failing: one error after the retries
    ],
)
def test_failed_attempts_make_one_download_error_and_leave_no_file(server, tmp_path, failures, retries, requests):
    httpd, url, digest = server
    httpd.failures_left = failures
    with pytest.raises(DownloadError, match="HTTP 503"):
        download(url, tmp_path / "cache" / "tiny.zip", digest, retries=retries, progress=False)
    assert httpd.gets == requests and list((tmp_path / "cache").iterdir()) == []


def test_download_with_bad_checksum_names_both_digests_and_leaves_no_file(server, tmp_path):
    _, url, digest = server
    wrong = "0" * 64
    dest = tmp_path / "cache" / "tiny.zip"
    with pytest.raises(ValueError) as err:
        download(url, dest, wrong, retries=0, progress=False)
    assert f"SHA-256 {digest}, expected {wrong}" in str(err.value)
    assert list(dest.parent.iterdir()) == []


def test_download_from_unreachable_server_says_where_to_place_the_file(tmp_path):
    dest = tmp_path / "tiny.zip"
    with pytest.raises(DownloadError) as err:
        download(closed_port_url(), dest, "a" * 64, retries=0, timeout=5, progress=False)
    assert str(dest) in str(err.value) and "a" * 64 in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_download_of_missing_url_is_a_download_error(server, tmp_path):
    _, url, digest = server
    with pytest.raises(DownloadError, match="HTTP 404"):
        download(url.replace("tiny.zip", "absent.zip"), tmp_path / "x.zip", digest, retries=0, progress=False)


@pytest.mark.parametrize("bad", [None, "abc", "g" * 64])
def test_download_refuses_to_run_without_a_valid_sha256(tmp_path, bad):
    with pytest.raises(ValueError, match="sha256: expected 64 hexadecimal digits, found"):
        download("http://127.0.0.1:1/x", tmp_path / "x", bad)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_download_refuses_a_bad_retries_count_before_any_network_access(tmp_path, bad):
    with pytest.raises(ValueError, match="retries: expected an integer >= 0, found"):
        download("http://127.0.0.1:1/x", tmp_path / "x", "a" * 64, retries=bad)
    assert list(tmp_path.iterdir()) == []


def test_existing_file_with_wrong_digest_is_reported_and_kept(tmp_path):
    dest = tmp_path / "tiny.zip"
    dest.write_bytes(b"not the archive")
    found = hashlib.sha256(b"not the archive").hexdigest()
    with pytest.raises(ValueError, match=found):
        download(closed_port_url(), dest, "b" * 64, progress=False)
    assert dest.read_bytes() == b"not the archive"
