//! The OCI image archives `images/build.sh` makes (`RENDERPOOL_IMAGES`): each one unpacks with
//! its blobs matching their digests, carries the project's names, says in its config what it
//! should, and runs under runc from its unpacked root with a read-only root filesystem and
//! only `/tmp` writable: render-pod renders a page (PNG, JPEG, lossy WebP), the operator
//! answers `--help`, Gotenberg converts a DOCX, pause stops cleanly on SIGTERM. Building
//! again gives the same digests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use renderpool_testkit::wait;
use renderpool_tests::oci::{Image, images_dir, listed};
use renderpool_tests::runc::{Container, Spec, Tmp};
use renderpool_tests::{corpus_dir, free_port, repo_root};

const RENDER_POD: &str = "render-pod";
const OPERATOR: &str = "renderpool-operator";
const GOTENBERG: &str = "gotenberg";
const PAUSE: &str = "pause";
/// The one timestamp of every image (images/build.sh's SOURCE_DATE_EPOCH).
const CREATED: &str = "2026-12-01T00:00:00Z";

fn chart_app_version() -> String {
    let chart =
        std::fs::read_to_string(repo_root().join("charts/renderpool-operator/Chart.yaml")).unwrap();
    let line = chart.lines().find(|l| l.starts_with("appVersion:")).unwrap();
    line.trim_start_matches("appVersion:").trim().trim_matches('"').to_string()
}

/// The name each archive must carry: the chart's appVersion for the project's own images.
fn expected_name(image: &str) -> String {
    let version = chart_app_version();
    match image {
        RENDER_POD => format!("ghcr.io/renderpool/render-pod:{version}"),
        OPERATOR => format!("ghcr.io/renderpool/renderpool-operator:{version}"),
        GOTENBERG => renderpool_api::gotenberg::image(),
        PAUSE => "renderpool.dev/test/pause:1".into(),
        other => panic!("no image {other}"),
    }
}

fn open(image: &str) -> Image {
    Image::open(&images_dir().join(format!("{image}.tar")))
}

/// A temporary bundle folder for `umoci unpack` (it makes `rootfs/` inside).
fn bundle() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("renderpool-bundle-").tempdir().unwrap()
}

fn exposed_ports(image: &Image) -> Vec<String> {
    image.runtime()["ExposedPorts"]
        .as_object()
        .map(|ports| ports.keys().cloned().collect())
        .unwrap_or_default()
}

/// A path inside `rootfs`, following symlinks as the container would see them.
fn resolve_in(rootfs: &Path, path: &str) -> PathBuf {
    let mut current = PathBuf::from(path);
    for _ in 0..16 {
        let inside = rootfs.join(current.strip_prefix("/").unwrap());
        match std::fs::read_link(&inside) {
            Ok(target) if target.is_absolute() => current = target,
            Ok(target) => current = current.parent().unwrap().join(target),
            Err(_) => return inside,
        }
    }
    panic!("{path}: too many symlinks in the image");
}

fn assert_executable(rootfs: &Path, path: &str) {
    let file = resolve_in(rootfs, path);
    let meta =
        std::fs::metadata(&file).unwrap_or_else(|err| panic!("{path} missing in the image: {err}"));
    assert!(
        meta.is_file() && meta.permissions().mode() & 0o111 != 0,
        "{path} is not an executable file"
    );
}

fn assert_no_shell(rootfs: &Path) {
    for shell in ["bin/sh", "bin/bash", "usr/bin/sh", "usr/bin/bash"] {
        assert!(!rootfs.join(shell).exists(), "the image has a shell at /{shell}");
    }
}

fn passwd_line(rootfs: &Path, user: &str) -> String {
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd")).unwrap();
    passwd
        .lines()
        .find(|line| line.starts_with(&format!("{user}:")))
        .unwrap_or_else(|| panic!("no {user} in /etc/passwd"))
        .to_string()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle.as_bytes())
}

/// Waits for a container's HTTP endpoint to answer 200; panics with the container's log.
async fn wait_http_ok(container: &Container, url: &str, timeout: Duration) {
    let client = reqwest::Client::new();
    let ok = wait::try_until(&format!("{url} answering 200"), timeout, || async {
        let status =
            client.get(url).timeout(Duration::from_secs(5)).send().await.map(|r| r.status());
        status.as_ref().is_ok_and(|s| s.is_success()).then_some(()).ok_or(status)
    })
    .await;
    if let Err(timed_out) = ok {
        panic!("{timed_out}; container log:\n{}", container.log_text());
    }
}

async fn wait_stopped(container: &Container, timeout: Duration) -> bool {
    let what = "the container stopped";
    wait::try_until(what, timeout, || async {
        let status = container.status();
        if status.as_deref() != Some("running") { Ok(()) } else { Err(status) }
    })
    .await
    .is_ok()
}

#[test]
fn every_archive_is_listed_verified_and_named() {
    let dir = images_dir();
    let entries = listed(&dir);
    let names: Vec<&str> = entries.iter().map(|entry| entry.name.as_str()).collect();
    let wanted: Vec<String> =
        [RENDER_POD, OPERATOR, GOTENBERG, PAUSE].iter().map(|i| expected_name(i)).collect();
    assert_eq!(names, wanted);
    for entry in &entries {
        let image = Image::open(&dir.join(&entry.file));
        assert_eq!(
            image.digest(),
            entry.digest,
            "{}: images.tsv and index.json disagree",
            entry.file
        );
        assert_eq!(std::fs::metadata(dir.join(&entry.file)).unwrap().len(), entry.bytes);
        // ctr and docker load take the full name; the OCI ref name is the tag, as docker save writes.
        assert_eq!(image.annotation("io.containerd.image.name"), Some(entry.name.as_str()));
        let tag = entry.name.rsplit(':').next().unwrap();
        assert_eq!(image.annotation("org.opencontainers.image.ref.name"), Some(tag));
        assert_eq!(image.config["architecture"], "amd64");
        assert_eq!(image.config["os"], "linux");
        assert_eq!(image.config["created"], CREATED, "{}", entry.file);
        assert_eq!(image.runtime()["Labels"]["org.opencontainers.image.version"], tag);
        let history = image.config["history"].as_array().unwrap();
        assert_eq!(history.len(), image.manifest["layers"].as_array().unwrap().len());
        assert!(
            history.iter().all(|h| h["created"] == CREATED),
            "{}: history times {history:?}",
            entry.file
        );
        for layer in image.manifest["layers"].as_array().unwrap() {
            assert_eq!(layer["mediaType"], "application/vnd.oci.image.layer.v1.tar+gzip");
        }
        // Nothing needs a writable path of its own: no volumes.
        assert!(image.runtime()["Volumes"].is_null(), "{}: declares volumes", entry.file);
    }
}

#[test]
fn chart_crd_and_readme_name_the_built_images() {
    let values =
        std::fs::read_to_string(repo_root().join("charts/renderpool-operator/values.yaml"))
            .unwrap();
    let repository = values
        .lines()
        .find_map(|line| line.trim().strip_prefix("repository: "))
        .expect("the chart's image.repository");
    assert_eq!(format!("{repository}:{}", chart_app_version()), expected_name(OPERATOR));
    let crd = std::fs::read_to_string(repo_root().join("crds/renderpool.yaml")).unwrap();
    assert!(
        crd.contains(&format!("default: {}", expected_name(RENDER_POD))),
        "the CRD's default render image is not {}",
        expected_name(RENDER_POD)
    );
    let page = std::fs::read_to_string(repo_root().join("docs/images.md")).unwrap();
    for image in [RENDER_POD, OPERATOR, GOTENBERG, PAUSE] {
        assert!(
            page.contains(&expected_name(image)),
            "docs/images.md does not name {}",
            expected_name(image)
        );
    }
}

#[tokio::test]
async fn render_pod_renders_a_page_under_runc_with_a_read_only_root() {
    let image = open(RENDER_POD);
    assert_eq!(image.user(), (65532, 65532));
    assert_eq!(image.command(), ["/usr/local/bin/render-pod", "serve"]);
    // The Containerfile's copies of the render pod's port.
    let port = renderpool_api::render_pod::PORT;
    assert_eq!(exposed_ports(&image), [format!("{port}/tcp")]);
    assert_eq!(image.env_var("RENDERPOD_LISTEN"), Some(format!("0.0.0.0:{port}")));
    let pdfium = image.env_var("PDFIUM_LIB_PATH").expect("PDFIUM_LIB_PATH in the image env");

    let bundle = bundle();
    let rootfs = image.unpack(bundle.path());
    assert!(resolve_in(&rootfs, &pdfium).is_file(), "PDFIUM_LIB_PATH={pdfium} is not in the image");
    assert_executable(&rootfs, "/usr/local/bin/render-pod");
    assert_no_shell(&rootfs);
    assert_eq!(
        passwd_line(&rootfs, "nonroot"),
        "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin"
    );
    // Built from a fixed path with every path remapped: no trace of this checkout or $CARGO_HOME.
    let binary = std::fs::read(rootfs.join("usr/local/bin/render-pod")).unwrap();
    let checkout = repo_root().canonicalize().unwrap();
    let cargo_home = std::env::var("CARGO_HOME")
        .unwrap_or_else(|_| format!("{}/.cargo", std::env::var("HOME").unwrap()));
    for path in [checkout.to_str().unwrap(), &cargo_home] {
        assert!(!contains(&binary, path), "the render-pod binary contains the build path {path}");
    }

    let port = free_port();
    let mut spec = Spec::from_image(&image, Tmp::Memory { mib: 64 })
        .with_env(&[("RENDERPOD_LISTEN", &format!("127.0.0.1:{port}"))]);
    // One CPU and 1 GiB on the container's own cgroup: the pod reads its slots from them.
    spec.limits = Some((1000, 1 << 30));
    let container = Container::start(bundle.path(), &spec);
    let base = format!("http://127.0.0.1:{port}");
    // Ready means a worker started from /proc/self/exe and bound libpdfium.so.
    wait_http_ok(&container, &format!("{base}/readyz"), Duration::from_secs(60)).await;
    let client = reqwest::Client::new();
    let ready: serde_json::Value =
        client.get(format!("{base}/readyz")).send().await.unwrap().json().await.unwrap();
    assert_eq!(ready["plan"]["cpu_slots"], 1, "slots not from the container's cgroup: {ready}");
    // The image's root certificates (Debian's, bundled at build), which the pod trusts for https
    // object stores and webhooks: it reads them at start and says how many.
    let roots = std::fs::read_to_string(rootfs.join("etc/ssl/certs/ca-certificates.crt")).unwrap();
    let bundled = roots.matches("-----BEGIN CERTIFICATE-----").count();
    assert!(bundled >= 100, "{bundled} certificates in the image's bundle");
    let log = container.log_text();
    // A text log line: `... trusted_roots=N`.
    let trusted: u64 = log
        .split("trusted_roots=")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|digits| digits.parse().ok())
        .unwrap_or_else(|| panic!("no trusted_roots in the pod's log:\n{log}"));
    assert!(
        (100..=bundled as u64).contains(&trusted),
        "the pod trusts {trusted} of the image's {bundled} roots"
    );

    let pdf = std::fs::read(corpus_dir().join("pdf/R-intro.pdf")).unwrap();
    // PNG, and the statically linked C encoders (libjpeg-turbo, libwebp), in the image's
    // sandboxed workers.
    for (query, content_type, magic) in [
        ("format=png", "image/png", b"\x89PNG\r\n\x1a\n".as_slice()),
        ("format=jpeg&quality=70", "image/jpeg", b"\xff\xd8\xff".as_slice()),
        ("format=webp&quality=80", "image/webp", b"RIFF".as_slice()),
    ] {
        let response = client
            .post(format!("{base}/v1/render?page=1&width=300&{query}"))
            .header("content-type", "application/pdf")
            .body(pdf.clone())
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{query}, log:\n{}", container.log_text());
        assert_eq!(response.headers()["content-type"], content_type, "{query}");
        assert_eq!(response.headers()["x-image-width"], "300", "{query}");
        let image = response.bytes().await.unwrap();
        assert!(image.starts_with(magic), "{query}");
        if content_type == "image/png" {
            let width = u32::from_be_bytes(image[16..20].try_into().unwrap());
            assert_eq!(width, 300, "PNG width in its header");
        }
    }

    // The binary is PID 1 (no shell in between): SIGTERM drains and stops it.
    container.kill("TERM");
    assert!(
        wait_stopped(&container, Duration::from_secs(40)).await,
        "render-pod did not stop on SIGTERM"
    );
}

#[test]
fn operator_answers_help_and_prints_the_crd_under_runc() {
    let image = open(OPERATOR);
    assert_eq!(image.user(), (65532, 65532));
    assert_eq!(image.command(), ["/usr/local/bin/renderpool-operator", "run"]);
    let bundle = bundle();
    let rootfs = image.unpack(bundle.path());
    assert_no_shell(&rootfs);
    // The chart runs `command: [renderpool-operator]`: the image's PATH must find it.
    let path = image.env_var("PATH").expect("PATH in the image env");
    let found = path
        .split(':')
        .any(|dir| resolve_in(&rootfs, &format!("{dir}/renderpool-operator")).is_file());
    assert!(found, "renderpool-operator is on no directory of PATH={path}");

    let run = |args: &[&str]| {
        let mut spec = Spec::from_image(&image, Tmp::Memory { mib: 16 });
        // As the chart's `command:` does: replaces the entrypoint, found through PATH.
        spec.args = args.iter().map(|arg| arg.to_string()).collect();
        let (_container, child) = Container::spawn(bundle.path(), &spec);
        child.wait_with_output().unwrap()
    };
    let help = run(&["renderpool-operator", "--help"]);
    let stdout = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.status.success(),
        "--help failed: {stdout}{}",
        String::from_utf8_lossy(&help.stderr)
    );
    assert!(stdout.contains("Usage") && stdout.contains("run"), "--help printed {stdout}");
    let crd = run(&["renderpool-operator", "crd"]);
    assert!(crd.status.success(), "crd failed: {}", String::from_utf8_lossy(&crd.stderr));
    let committed = std::fs::read_to_string(repo_root().join("crds/renderpool.yaml")).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&crd.stdout),
        committed,
        "the image's binary prints another CRD"
    );
}

#[tokio::test]
async fn gotenberg_converts_a_docx_under_runc_with_a_read_only_root() {
    let image = open(GOTENBERG);
    // Started as the official gotenberg/gotenberg image is.
    assert_eq!(image.user(), (1001, 1001));
    assert_eq!(image.command(), ["/usr/bin/tini", "--", "gotenberg"]);
    assert_eq!(exposed_ports(&image), [format!("{}/tcp", renderpool_api::gotenberg::PORT)]);
    assert_eq!(image.runtime()["WorkingDir"], "/home/gotenberg");
    for exporter in ["OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_LOGS_EXPORTER"] {
        assert_eq!(image.env_var(exporter).as_deref(), Some("none"), "{exporter}");
    }
    let bundle = bundle();
    let rootfs = image.unpack(bundle.path());
    assert_eq!(
        passwd_line(&rootfs, "gotenberg"),
        "gotenberg:x:1001:1001::/home/gotenberg:/bin/bash"
    );
    // Gotenberg stats each of these at start; every one must be there and executable.
    for var in [
        "LIBREOFFICE_BIN_PATH",
        "UNOCONVERTER_BIN_PATH",
        "PDFTK_BIN_PATH",
        "QPDF_BIN_PATH",
        "EXIFTOOL_BIN_PATH",
        "PDFCPU_BIN_PATH",
    ] {
        let path = image.env_var(var).unwrap_or_else(|| panic!("{var} not in the image env"));
        assert_executable(&rootfs, &path);
    }
    assert_executable(&rootfs, "/usr/bin/gotenberg");
    assert_executable(&rootfs, "/usr/bin/tini");

    // A disk-backed /tmp, world-writable as an emptyDir is; the root stays read-only.
    let tmp = tempfile::Builder::new().prefix("renderpool-gotenberg-tmp-").tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let port = free_port();
    let spec = Spec::from_image(&image, Tmp::Dir(tmp.path().into())).with_args(
        &image,
        &[
            "gotenberg",
            &format!("--api-port={port}"),
            "--api-bind-ip=127.0.0.1",
            "--libreoffice-auto-start=true",
        ],
    );
    let container = Container::start(bundle.path(), &spec);
    let base = format!("http://127.0.0.1:{port}");
    wait_http_ok(&container, &format!("{base}/health"), Duration::from_secs(120)).await;

    let docx = std::fs::read(corpus_dir().join("office/test.docx")).unwrap();
    let part = reqwest::multipart::Part::bytes(docx).file_name("test.docx");
    let response = reqwest::Client::new()
        .post(format!("{base}/forms/libreoffice/convert"))
        .multipart(reqwest::multipart::Form::new().part("files", part))
        .timeout(Duration::from_secs(120))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "log:\n{}", container.log_text());
    let pdf = response.bytes().await.unwrap();
    assert!(pdf.starts_with(b"%PDF-"), "not a PDF: {:?}", &pdf[..pdf.len().min(32)]);
    assert!(contains(&pdf[pdf.len().saturating_sub(64)..], "%%EOF"), "the PDF is cut short");
}

#[test]
fn pause_runs_until_sigterm_and_exits_zero() {
    let image = open(PAUSE);
    assert_eq!(image.user(), (65535, 65535));
    assert_eq!(image.command(), ["/pause"]);
    let bundle = bundle();
    let rootfs = image.unpack(bundle.path());
    let files: Vec<String> = std::fs::read_dir(&rootfs)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files, ["pause"], "the pause image holds one file");

    let (container, mut child) =
        Container::spawn(bundle.path(), &Spec::from_image(&image, Tmp::Memory { mib: 1 }));
    let pid = wait::until_blocking("pause running", Duration::from_secs(10), || {
        let status = container.status();
        if status.as_deref() == Some("running") {
            container.pid().ok_or(status)
        } else {
            Err(status)
        }
    });
    // Asleep with its handlers in place: it reached its wait for a signal.
    let waiting = || {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let field = |name: &str| {
            let line = status.lines().find(|l| l.starts_with(name)).unwrap_or_default();
            line[name.len().min(line.len())..].trim().to_string()
        };
        let caught = u64::from_str_radix(&field("SigCgt:"), 16).unwrap_or(0);
        let switches: u64 = field("voluntary_ctxt_switches:").parse().unwrap_or(0);
        let asleep = field("State:").starts_with('S') && caught & PAUSE_SIGNALS == PAUSE_SIGNALS;
        (asleep, switches)
    };
    let slept = wait::until_blocking("pause waiting for a signal", Duration::from_secs(10), || {
        let (asleep, switches) = waiting();
        if asleep { Ok(switches) } else { Err(switches) }
    });
    // A signal that is not a stop (a child's end) wakes it, and it goes back to waiting.
    container.kill("CHLD");
    wait::until_blocking("pause back to waiting after SIGCHLD", Duration::from_secs(10), || {
        let (asleep, switches) = waiting();
        if asleep && switches > slept { Ok(()) } else { Err((asleep, switches)) }
    });
    assert_eq!(container.status().as_deref(), Some("running"), "pause exited on SIGCHLD");
    container.kill("TERM");
    let status =
        wait::until_blocking("pause's exit after SIGTERM", Duration::from_secs(10), || {
            child.try_wait().unwrap()
        });
    assert!(status.success(), "pause exited with {status}");
}

/// SIGINT, SIGTERM and SIGCHLD in a `/proc/<pid>/status` signal mask (bit n-1 for signal n).
const PAUSE_SIGNALS: u64 = 1 << (2 - 1) | 1 << (15 - 1) | 1 << (17 - 1);

#[test]
fn building_again_from_the_same_inputs_gives_the_same_digests() {
    let first = listed(&images_dir());
    let out = tempfile::Builder::new().prefix("renderpool-images-again-").tempdir().unwrap();
    let output = Command::new(repo_root().join("images/build.sh"))
        .args(["--rebuild", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "images/build.sh --rebuild failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let second = listed(out.path());
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(a, b, "{} differs when built again", a.name);
    }
    assert_eq!(first.len(), second.len());
}
