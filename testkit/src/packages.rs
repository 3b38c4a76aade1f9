//! Office packages built here, entry by entry: ordinary DOCX files, a macro-enabled one, ZIP
//! bombs whose central directory tells the truth (refused from the directory alone) or lies
//! (declares little, inflates to much: only LibreOffice finds out), and a document that is
//! honest and small but slow for LibreOffice to lay out. Each is a well-formed ZIP archive.
// Writing into a Vec cannot fail: the unwraps below never fire.
#![allow(clippy::unwrap_used)]

use std::io::Write;

const LOCAL_HEADER: u32 = 0x0403_4b50;
const CENTRAL_HEADER: u32 = 0x0201_4b50;
const END_RECORD: u32 = 0x0605_4b50;
const ZIP64_EXTRA: u16 = 0x0001;
const STORED: u16 = 0;
const DEFLATED: u16 = 8;

/// What the central directory says of an entry, where it differs from the truth.
#[derive(Debug, Clone, Copy, Default)]
pub struct Declared {
    /// Declared uncompressed size instead of the real one.
    pub uncompressed: Option<u64>,
    /// Declared compressed size instead of the real one (the data written stays the real one).
    pub compressed: Option<u64>,
}

/// A ZIP archive under construction.
#[derive(Default)]
pub struct Package {
    out: Vec<u8>,
    central: Vec<u8>,
    entries: u16,
}

impl Package {
    /// An empty package.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `data` stored uncompressed.
    pub fn stored(self, name: &str, data: &[u8]) -> Self {
        let crc = crc(data);
        self.raw(name, STORED, data, crc, data.len() as u64, Declared::default())
    }

    /// Adds `data` deflated.
    pub fn deflated(self, name: &str, data: &[u8]) -> Self {
        self.deflated_repeat(name, data, b"", 0, b"", Declared::default())
    }

    /// Adds a deflated entry of `head`, `unit` repeated `count` times, then `tail`, compressed
    /// as it is generated (a gibibyte never sits in memory), declared as `declared` says.
    pub fn deflated_repeat(
        self,
        name: &str,
        head: &[u8],
        unit: &[u8],
        count: u64,
        tail: &[u8],
        declared: Declared,
    ) -> Self {
        let mut hasher = flate2::Crc::new();
        let mut encoder =
            flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        let mut write = |bytes: &[u8]| {
            hasher.update(bytes);
            encoder.write_all(bytes).unwrap();
        };
        write(head);
        // Whole chunks of units: far fewer calls than one per unit.
        let per_chunk = (64 * 1024 / unit.len().max(1)).max(1) as u64;
        let chunk = unit.repeat(per_chunk as usize);
        for _ in 0..count / per_chunk {
            write(&chunk);
        }
        for _ in 0..count % per_chunk {
            write(unit);
        }
        write(tail);
        let length = head.len() as u64 + unit.len() as u64 * count + tail.len() as u64;
        let data = encoder.finish().unwrap();
        self.raw(name, DEFLATED, &data, hasher.sum(), length, declared)
    }

    /// Adds an entry of `data` as stored in the archive (already compressed by `method`), its
    /// real CRC-32 and inflated `length`, declared as `declared` says.
    fn raw(
        mut self,
        name: &str,
        method: u16,
        data: &[u8],
        crc: u32,
        length: u64,
        declared: Declared,
    ) -> Self {
        let uncompressed = declared.uncompressed.unwrap_or(length);
        let compressed = declared.compressed.unwrap_or(data.len() as u64);
        let zip64 = uncompressed >= u64::from(u32::MAX) || compressed >= u64::from(u32::MAX);
        let (size32, extra) = if zip64 {
            let mut extra = Vec::new();
            extra.extend_from_slice(&ZIP64_EXTRA.to_le_bytes());
            extra.extend_from_slice(&16u16.to_le_bytes());
            extra.extend_from_slice(&uncompressed.to_le_bytes());
            extra.extend_from_slice(&compressed.to_le_bytes());
            ((u32::MAX, u32::MAX), extra)
        } else {
            ((compressed as u32, uncompressed as u32), Vec::new())
        };
        let offset = self.out.len() as u32;
        let version: u16 = if zip64 { 45 } else { 20 };
        // Local header: signature, version, flags, method, time, date, crc, sizes, name, extra.
        let mut local = Vec::new();
        local.extend_from_slice(&LOCAL_HEADER.to_le_bytes());
        local.extend_from_slice(&version.to_le_bytes());
        local.extend_from_slice(&0u16.to_le_bytes());
        local.extend_from_slice(&method.to_le_bytes());
        local.extend_from_slice(&[0, 0, 0x21, 0]);
        local.extend_from_slice(&crc.to_le_bytes());
        local.extend_from_slice(&size32.0.to_le_bytes());
        local.extend_from_slice(&size32.1.to_le_bytes());
        local.extend_from_slice(&(name.len() as u16).to_le_bytes());
        local.extend_from_slice(&(extra.len() as u16).to_le_bytes());
        local.extend_from_slice(name.as_bytes());
        local.extend_from_slice(&extra);
        self.out.extend_from_slice(&local);
        self.out.extend_from_slice(data);
        // Central header: as the local one, plus comment, disk, attributes and offset.
        let central = &mut self.central;
        central.extend_from_slice(&CENTRAL_HEADER.to_le_bytes());
        central.extend_from_slice(&version.to_le_bytes());
        central.extend_from_slice(&version.to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes());
        central.extend_from_slice(&method.to_le_bytes());
        central.extend_from_slice(&[0, 0, 0x21, 0]);
        central.extend_from_slice(&crc.to_le_bytes());
        central.extend_from_slice(&size32.0.to_le_bytes());
        central.extend_from_slice(&size32.1.to_le_bytes());
        central.extend_from_slice(&(name.len() as u16).to_le_bytes());
        central.extend_from_slice(&(extra.len() as u16).to_le_bytes());
        // Comment length, disk, internal attributes; then external attributes.
        central.extend_from_slice(&[0; 6]);
        central.extend_from_slice(&0u32.to_le_bytes());
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
        central.extend_from_slice(&extra);
        self.entries += 1;
        self
    }

    /// The archive: entries, central directory, end record.
    pub fn finish(mut self) -> Vec<u8> {
        let offset = self.out.len() as u32;
        let size = self.central.len() as u32;
        self.out.extend_from_slice(&self.central);
        self.out.extend_from_slice(&END_RECORD.to_le_bytes());
        self.out.extend_from_slice(&[0; 4]);
        self.out.extend_from_slice(&self.entries.to_le_bytes());
        self.out.extend_from_slice(&self.entries.to_le_bytes());
        self.out.extend_from_slice(&size.to_le_bytes());
        self.out.extend_from_slice(&offset.to_le_bytes());
        self.out.extend_from_slice(&0u16.to_le_bytes());
        self.out
    }
}

fn crc(data: &[u8]) -> u32 {
    let mut hasher = flate2::Crc::new();
    hasher.update(data);
    hasher.sum()
}

/// The main part's content type of a DOCX.
pub const DOCX_MAIN: &str =
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml";
/// The main part's content type of a DOCM.
pub const DOCM_MAIN: &str = "application/vnd.ms-word.document.macroEnabled.main+xml";

const DOCUMENT_HEAD: &[u8] = b"<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\
<w:document xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\"><w:body>";
const DOCUMENT_TAIL: &[u8] = b"</w:body></w:document>";
/// One paragraph of the bombs: what LibreOffice must lay out, over and over.
const BOMB_PARAGRAPH: &[u8] = b"<w:p><w:r><w:t>bomb</w:t></w:r></w:p>";

fn content_types(main: &str, vba: bool) -> String {
    let vba = if vba {
        "<Default Extension=\"bin\" ContentType=\"application/vnd.ms-office.vbaProject\"/>"
    } else {
        ""
    };
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\
<Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\">\
<Default Extension=\"rels\" ContentType=\"application/vnd.openxmlformats-package.relationships+xml\"/>\
<Default Extension=\"xml\" ContentType=\"application/xml\"/>{vba}\
<Override PartName=\"/word/document.xml\" ContentType=\"{main}\"/></Types>"
    )
}

const ROOT_RELS: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\
<Relationships xmlns=\"http://schemas.openxmlformats.org/package/2006/relationships\">\
<Relationship Id=\"rId1\" Type=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument\" Target=\"word/document.xml\"/>\
</Relationships>";

/// The first parts of a DOCX whose main part has content type `main`.
fn docx_start(main: &str, vba: bool) -> Package {
    Package::new()
        .deflated("[Content_Types].xml", content_types(main, vba).as_bytes())
        .deflated("_rels/.rels", ROOT_RELS.as_bytes())
}

/// A DOCX of one paragraph per line of `text`.
pub fn docx(text: &str) -> Vec<u8> {
    let body: String =
        text.lines().map(|line| format!("<w:p><w:r><w:t>{line}</w:t></w:r></w:p>")).collect();
    let document = [DOCUMENT_HEAD, body.as_bytes(), DOCUMENT_TAIL].concat();
    docx_start(DOCX_MAIN, false).deflated("word/document.xml", &document).finish()
}

/// A macro-enabled Word document (DOCM): a main part of the macro-enabled type and the
/// `vbaProject.bin` part that holds its VBA project (a stand-in here: what matters is that it
/// is there).
pub fn docm(text: &str) -> Vec<u8> {
    let body = format!("<w:p><w:r><w:t>{text}</w:t></w:r></w:p>");
    let document = [DOCUMENT_HEAD, body.as_bytes(), DOCUMENT_TAIL].concat();
    let rels = "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\
<Relationships xmlns=\"http://schemas.openxmlformats.org/package/2006/relationships\">\
<Relationship Id=\"rId1\" Type=\"http://schemas.microsoft.com/office/2006/relationships/vbaProject\" Target=\"vbaProject.bin\"/>\
</Relationships>";
    docx_start(DOCM_MAIN, true)
        .deflated("word/document.xml", &document)
        .deflated("word/_rels/document.xml.rels", rels.as_bytes())
        .stored("word/vbaProject.bin", &[0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1])
        .finish()
}

/// Paragraphs of the bombs that make `inflated` bytes (at least one).
fn bomb_paragraphs(inflated: u64) -> u64 {
    let frame = (DOCUMENT_HEAD.len() + DOCUMENT_TAIL.len()) as u64;
    (inflated.saturating_sub(frame) / BOMB_PARAGRAPH.len() as u64).max(1)
}

/// A DOCX whose `word/document.xml` inflates to about `inflated` bytes of one paragraph over
/// and over (a thousand to one), its central directory telling the truth.
pub fn inflate_bomb_docx(inflated: u64) -> Vec<u8> {
    bomb(inflated, Declared::default())
}

/// The same bomb, but its directory declares `document.xml` as `declared` bytes: nothing short
/// of inflating it shows what it is.
pub fn lying_bomb_docx(inflated: u64, declared: u64) -> Vec<u8> {
    bomb(inflated, Declared { uncompressed: Some(declared), compressed: None })
}

fn bomb(inflated: u64, declared: Declared) -> Vec<u8> {
    docx_start(DOCX_MAIN, false)
        .deflated_repeat(
            "word/document.xml",
            DOCUMENT_HEAD,
            BOMB_PARAGRAPH,
            bomb_paragraphs(inflated),
            DOCUMENT_TAIL,
            declared,
        )
        .finish()
}

/// An honest DOCX that LibreOffice takes long to lay out: `paragraphs` paragraphs of
/// pseudo-random words (so it compresses about two to one, far from any bomb ratio), in
/// one document part. `seed` makes distinct documents (distinct hashes) of the same weight.
pub fn slow_docx(paragraphs: usize, seed: u64) -> Vec<u8> {
    const LETTERS: &[u8] = b"etaoinshrdlucmfwypvbgkqjxz";
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut next = move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) as usize
    };
    let mut document = DOCUMENT_HEAD.to_vec();
    for _ in 0..paragraphs {
        document.extend_from_slice(b"<w:p><w:r><w:t>");
        for word in 0..12 {
            if word > 0 {
                document.push(b' ');
            }
            for _ in 0..(2 + next() % 8) {
                document.push(LETTERS[next() % LETTERS.len()]);
            }
        }
        document.extend_from_slice(b"</w:t></w:r></w:p>");
    }
    document.extend_from_slice(DOCUMENT_TAIL);
    docx_start(DOCX_MAIN, false).deflated("word/document.xml", &document).finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packages_are_zip_archives_with_their_parts() {
        let doc = docx("hello\nworld");
        assert!(doc.starts_with(b"PK\x03\x04"));
        let text = String::from_utf8_lossy(&doc);
        assert!(text.contains("word/document.xml") && text.contains("[Content_Types].xml"));
        assert!(String::from_utf8_lossy(&docm("x")).contains("word/vbaProject.bin"));
        // A megabyte of bomb is about a kilobyte of archive.
        let bomb = inflate_bomb_docx(1 << 20);
        assert!(bomb.len() < 16 << 10, "{}", bomb.len());
        assert_eq!(bomb_paragraphs(0), 1);
        let slow = slow_docx(1000, 1);
        assert!(slow.len() > 20_000, "{}", slow.len());
        assert_ne!(slow, slow_docx(1000, 2));
    }
}
