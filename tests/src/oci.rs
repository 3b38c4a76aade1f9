//! Reading the OCI image archives `images/build.sh` makes (a tar of an OCI image layout): the
//! index, the manifest and the config, every blob checked against its digest and size, and the
//! root unpacked with umoci for a runtime.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The folder of image archives (`RENDERPOOL_IMAGES`, set by `scripts/setup.sh --images`).
pub fn images_dir() -> PathBuf {
    let dir = std::env::var_os("RENDERPOOL_IMAGES").map(PathBuf::from).unwrap_or_else(|| {
        panic!("RENDERPOOL_IMAGES is not set: run `scripts/test.sh` or `eval \"$(scripts/setup.sh --images)\"`")
    });
    assert!(
        dir.join("images.tsv").is_file(),
        "{} has no images.tsv: run images/build.sh",
        dir.display()
    );
    dir
}

/// One line of `images.tsv`: the image's name, archive file, digest and archive size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub name: String,
    pub file: String,
    pub digest: String,
    pub bytes: u64,
}

/// The images a build folder lists, in build order.
pub fn listed(dir: &Path) -> Vec<Listed> {
    let path = dir.join("images.tsv");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    text.lines()
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            assert_eq!(fields.len(), 4, "{}: bad line {line:?}", path.display());
            Listed {
                name: fields[0].into(),
                file: fields[1].into(),
                digest: fields[2].into(),
                bytes: fields[3].parse().unwrap_or_else(|err| {
                    panic!("{}: bad size in {line:?}: {err}", path.display())
                }),
            }
        })
        .collect()
}

/// An image archive unpacked into a temporary layout, its descriptors read and verified.
#[derive(Debug)]
pub struct Image {
    layout: tempfile::TempDir,
    /// The index's only manifest descriptor (with its annotations).
    pub descriptor: Value,
    pub manifest: Value,
    pub config: Value,
}

impl Image {
    /// Extracts `archive` and reads it; panics on a missing or mismatched blob.
    pub fn open(archive: &Path) -> Image {
        let layout = tempfile::Builder::new()
            .prefix("renderpool-oci-")
            .tempdir()
            .unwrap_or_else(|err| panic!("no temporary folder: {err}"));
        run(Command::new("tar").arg("-xf").arg(archive).arg("-C").arg(layout.path()));
        let oci_layout = read_json(&layout.path().join("oci-layout"));
        assert_eq!(oci_layout["imageLayoutVersion"], "1.0.0", "{}", archive.display());
        let index = read_json(&layout.path().join("index.json"));
        let manifests = index["manifests"].as_array().cloned().unwrap_or_default();
        assert_eq!(manifests.len(), 1, "{}: one image per archive", archive.display());
        let descriptor = manifests[0].clone();
        let manifest = blob_json(layout.path(), &descriptor);
        let config = blob_json(layout.path(), &manifest["config"]);
        for layer in manifest["layers"].as_array().into_iter().flatten() {
            blob(layout.path(), layer);
        }
        Image { layout, descriptor, manifest, config }
    }

    /// The layout folder (for `umoci`).
    pub fn layout(&self) -> &Path {
        self.layout.path()
    }

    /// The image's digest: its manifest's, as a registry or `ctr images ls` shows it.
    pub fn digest(&self) -> &str {
        self.descriptor["digest"].as_str().unwrap_or_default()
    }

    /// An annotation of the index entry.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.descriptor["annotations"][key].as_str()
    }

    /// The runtime part of the config (`User`, `Env`, `Entrypoint`, ...).
    pub fn runtime(&self) -> &Value {
        &self.config["config"]
    }

    /// `Entrypoint` followed by `Cmd`: what a runtime starts when the pod sets neither.
    pub fn command(&self) -> Vec<String> {
        strings(&self.runtime()["Entrypoint"])
            .into_iter()
            .chain(strings(&self.runtime()["Cmd"]))
            .collect()
    }

    /// `Env` as NAME=value strings.
    pub fn env(&self) -> Vec<String> {
        strings(&self.runtime()["Env"])
    }

    /// The value of one `Env` entry.
    pub fn env_var(&self, name: &str) -> Option<String> {
        self.env()
            .into_iter()
            .find_map(|entry| entry.strip_prefix(&format!("{name}=")).map(String::from))
    }

    /// `User` as numeric uid and gid (the images use numbers, so a kubelet can check
    /// `runAsNonRoot` without reading the image's /etc/passwd).
    pub fn user(&self) -> (u32, u32) {
        let user = self.runtime()["User"].as_str().unwrap_or_default();
        let parse = |part: Option<&str>| {
            part.and_then(|p| p.parse().ok())
                .unwrap_or_else(|| panic!("image user {user:?} is not numeric uid:gid"))
        };
        let mut parts = user.split(':');
        (parse(parts.next()), parse(parts.next()))
    }

    /// Unpacks the root with `umoci unpack` into `bundle/rootfs`; returns the rootfs path.
    pub fn unpack(&self, bundle: &Path) -> PathBuf {
        let tag = self.annotation("org.opencontainers.image.ref.name").unwrap_or_default();
        let image = format!("{}:{tag}", self.layout().display());
        run(Command::new("umoci").args(["unpack", "--image", &image]).arg(bundle));
        bundle.join("rootfs")
    }
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| items.iter().filter_map(|item| item.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

fn read_json(path: &Path) -> Value {
    let bytes =
        std::fs::read(path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|err| panic!("{} is not JSON: {err}", path.display()))
}

/// A blob's bytes, after checking them against the descriptor's digest and size.
fn blob(layout: &Path, descriptor: &Value) -> Vec<u8> {
    let digest = descriptor["digest"].as_str().unwrap_or_default();
    let hex = digest
        .strip_prefix("sha256:")
        .unwrap_or_else(|| panic!("descriptor without a sha256 digest: {descriptor}"));
    let path = layout.join("blobs/sha256").join(hex);
    let bytes =
        std::fs::read(&path).unwrap_or_else(|err| panic!("blob {digest} is missing: {err}"));
    assert_eq!(Some(bytes.len() as u64), descriptor["size"].as_u64(), "size of blob {digest}");
    let actual: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(actual, hex, "content of blob {digest}");
    bytes
}

fn blob_json(layout: &Path, descriptor: &Value) -> Value {
    let bytes = blob(layout, descriptor);
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|err| panic!("blob {descriptor} is not JSON: {err}"))
}

/// Runs a set-up command, panicking with its output when it fails; returns its stdout.
pub(crate) fn run(command: &mut Command) -> String {
    crate::cluster::run(command).unwrap_or_else(|err| panic!("{err}"))
}
