//! What a document is, from its bytes alone (never from a name or a declared type): a PDF, an
//! Office format Gotenberg converts, or something refused before Gotenberg sees it. Pure and
//! bounded: one pass over the ZIP or compound-file directory at most, never a decompression.
//! A package's declared inflated size is weighed by [`inflation`], against limits the caller
//! holds.

mod bytes;
mod cfb;
pub mod inflation;
mod zip;

use std::fmt;

/// How far into the file a PDF header may start (PDFium, like Acrobat, skips leading junk).
const PDF_HEADER_WINDOW: usize = 1024;

/// An Office format LibreOffice converts; Gotenberg picks the importer by file extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OfficeFormat {
    /// Word (OOXML).
    Docx,
    /// Excel (OOXML).
    Xlsx,
    /// PowerPoint (OOXML).
    Pptx,
    /// OpenDocument text.
    Odt,
    /// OpenDocument spreadsheet.
    Ods,
    /// OpenDocument presentation.
    Odp,
    /// OpenDocument drawing.
    Odg,
    /// Word 97-2003.
    Doc,
    /// Excel 97-2003.
    Xls,
    /// PowerPoint 97-2003.
    Ppt,
    /// Rich Text Format.
    Rtf,
}

impl OfficeFormat {
    /// The file extension Gotenberg needs to pick LibreOffice's importer.
    pub fn extension(self) -> &'static str {
        match self {
            OfficeFormat::Docx => "docx",
            OfficeFormat::Xlsx => "xlsx",
            OfficeFormat::Pptx => "pptx",
            OfficeFormat::Odt => "odt",
            OfficeFormat::Ods => "ods",
            OfficeFormat::Odp => "odp",
            OfficeFormat::Odg => "odg",
            OfficeFormat::Doc => "doc",
            OfficeFormat::Xls => "xls",
            OfficeFormat::Ppt => "ppt",
            OfficeFormat::Rtf => "rtf",
        }
    }
}

impl fmt::Display for OfficeFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.extension())
    }
}

/// Why bytes that look like a container are not converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// An EPUB (a ZIP with a `mimetype` entry, but not an OpenDocument).
    #[error("an EPUB e-book is not an Office document")]
    Epub,
    /// An OpenDocument type LibreOffice is not asked to convert here (e.g. a formula or database).
    #[error("the OpenDocument type {0:?} is not converted")]
    OtherOpenDocument(String),
    /// A ZIP archive that is no Office package.
    #[error("a ZIP archive that is not an Office document")]
    OtherZip,
    /// An OOXML package of a kind other than Word, Excel or PowerPoint (XPS, Visio, ...).
    #[error("an Open XML package that is not a Word, Excel or PowerPoint document")]
    OtherOoxml,
    /// A compound file that is no Word, Excel or PowerPoint document (MSI, MSG, ...).
    #[error("a compound file that is not a Word, Excel or PowerPoint document")]
    OtherCompound,
    /// A password-protected OOXML document (a compound file holding `EncryptionInfo`).
    #[error("the Office document is encrypted with a password")]
    Encrypted,
    /// A package that carries macros (a VBA project, Excel 4 macro sheets): refused rather than
    /// trusted to LibreOffice's macro security, whatever the file's extension says.
    #[error("the Office document carries macros ({0}); macro-enabled documents are not converted")]
    MacroEnabled(&'static str),
    /// The container itself is damaged: nothing could read it.
    #[error("the document's container is damaged: {0}")]
    Damaged(String),
}

impl Refusal {
    /// True when the input is a damaged or locked document rather than an unsupported kind.
    pub fn is_unreadable(&self) -> bool {
        matches!(self, Refusal::Encrypted | Refusal::Damaged(_))
    }
}

/// What the bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detected {
    /// A PDF: PDFium reads it directly.
    Pdf,
    /// An Office document to convert first.
    Office(OfficeFormat),
    /// A container that is refused before anything converts it.
    Refused(Refusal),
    /// Neither PDF nor a known container: PDFium will judge it (and refuse it).
    Unknown,
}

/// Detects the format of `bytes`.
pub fn detect(bytes: &[u8]) -> Detected {
    if zip::is_zip(bytes) {
        return from_zip(bytes);
    }
    if cfb::is_cfb(bytes) {
        return from_compound(bytes);
    }
    let head = &bytes[..bytes.len().min(PDF_HEADER_WINDOW)];
    if head.windows(5).any(|w| w == b"%PDF-") {
        return Detected::Pdf;
    }
    if bytes.starts_with(b"{\\rtf") {
        return Detected::Office(OfficeFormat::Rtf);
    }
    Detected::Unknown
}

fn from_zip(bytes: &[u8]) -> Detected {
    // The central directory must be readable whatever the first entry says: LibreOffice
    // refuses a package it cannot list, so Gotenberg would only spend time failing on it.
    let names = match zip::names(bytes) {
        Ok(names) => names,
        Err(e) => return Detected::Refused(Refusal::Damaged(e.to_string())),
    };
    if let Some(first) = zip::first_entry(bytes).filter(|e| e.name == b"mimetype") {
        return match first.stored {
            Some(mime) => from_mimetype(mime),
            None => Detected::Refused(Refusal::OtherZip),
        };
    }
    let has = |part: &[u8]| names.iter().any(|n| n.eq_ignore_ascii_case(part));
    let under = |folder: &[u8]| {
        names
            .iter()
            .any(|n| n.len() > folder.len() && n[..folder.len()].eq_ignore_ascii_case(folder))
    };
    if !has(b"[Content_Types].xml") {
        return Detected::Refused(Refusal::OtherZip);
    }
    // Where OOXML keeps macros: the VBA project (word/, xl/ or ppt/vbaProject.bin, the part a
    // .docm, .xlsm or .pptm carries) and Excel 4 macro sheets, which need no VBA project.
    let named = |file: &[u8]| {
        names
            .iter()
            .any(|n| n.len() >= file.len() && n[n.len() - file.len()..].eq_ignore_ascii_case(file))
    };
    if named(b"vbaProject.bin") {
        return Detected::Refused(Refusal::MacroEnabled("a VBA project"));
    }
    if under(b"xl/macrosheets/") {
        return Detected::Refused(Refusal::MacroEnabled("Excel 4 macro sheets"));
    }
    if under(b"word/") {
        Detected::Office(OfficeFormat::Docx)
    } else if under(b"xl/") {
        Detected::Office(OfficeFormat::Xlsx)
    } else if under(b"ppt/") {
        Detected::Office(OfficeFormat::Pptx)
    } else {
        Detected::Refused(Refusal::OtherOoxml)
    }
}

fn from_mimetype(mime: &[u8]) -> Detected {
    let mime = String::from_utf8_lossy(mime);
    let mime = mime.trim();
    let format = match mime {
        "application/epub+zip" => return Detected::Refused(Refusal::Epub),
        "application/vnd.oasis.opendocument.text"
        | "application/vnd.oasis.opendocument.text-template"
        | "application/vnd.oasis.opendocument.text-master" => OfficeFormat::Odt,
        "application/vnd.oasis.opendocument.spreadsheet"
        | "application/vnd.oasis.opendocument.spreadsheet-template" => OfficeFormat::Ods,
        "application/vnd.oasis.opendocument.presentation"
        | "application/vnd.oasis.opendocument.presentation-template" => OfficeFormat::Odp,
        "application/vnd.oasis.opendocument.graphics"
        | "application/vnd.oasis.opendocument.graphics-template" => OfficeFormat::Odg,
        other if other.starts_with("application/vnd.oasis.opendocument.") => {
            return Detected::Refused(Refusal::OtherOpenDocument(other.to_string()));
        }
        _ => return Detected::Refused(Refusal::OtherZip),
    };
    Detected::Office(format)
}

fn from_compound(bytes: &[u8]) -> Detected {
    let names = match cfb::root_names(bytes) {
        Ok(names) => names,
        Err(e) => return Detected::Refused(Refusal::Damaged(e.to_string())),
    };
    let has = |name: &str| names.iter().any(|n| n.eq_ignore_ascii_case(name));
    if has("EncryptionInfo") && has("EncryptedPackage") {
        Detected::Refused(Refusal::Encrypted)
    } else if has("Macros") || has("_VBA_PROJECT_CUR") {
        // Word 97-2003 keeps its VBA project in a root storage `Macros`, Excel in `_VBA_PROJECT_CUR`.
        Detected::Refused(Refusal::MacroEnabled("a VBA project"))
    } else if has("WordDocument") {
        Detected::Office(OfficeFormat::Doc)
    } else if has("Workbook") || has("Book") {
        Detected::Office(OfficeFormat::Xls)
    } else if has("PowerPoint Document") {
        Detected::Office(OfficeFormat::Ppt)
    } else {
        Detected::Refused(Refusal::OtherCompound)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::cfb::tests::compound;
    use super::zip::tests::archive;
    use super::*;

    #[test]
    fn pdfs_and_rtf_by_their_headers() {
        assert_eq!(detect(b"%PDF-1.7\n..."), Detected::Pdf);
        assert_eq!(detect(b"junk before %PDF-1.4"), Detected::Pdf);
        assert_eq!(detect(b"{\\rtf1\\ansi hello}"), Detected::Office(OfficeFormat::Rtf));
        assert_eq!(detect(b""), Detected::Unknown);
        assert_eq!(detect(&[0x42; 4096]), Detected::Unknown);
    }

    #[test]
    fn ooxml_kind_from_its_parts() {
        let docx = archive(&[("[Content_Types].xml", b"<T/>"), ("word/document.xml", b"<w/>")]);
        assert_eq!(detect(&docx), Detected::Office(OfficeFormat::Docx));
        let xlsx = archive(&[("[content_types].xml", b"<T/>"), ("XL/workbook.xml", b"<x/>")]);
        assert_eq!(detect(&xlsx), Detected::Office(OfficeFormat::Xlsx));
        let pptx = archive(&[("[Content_Types].xml", b"<T/>"), ("ppt/presentation.xml", b"")]);
        assert_eq!(detect(&pptx), Detected::Office(OfficeFormat::Pptx));
        let xps = archive(&[("[Content_Types].xml", b"<T/>"), ("Documents/1/x.fpage", b"")]);
        assert_eq!(detect(&xps), Detected::Refused(Refusal::OtherOoxml));
        let plain = archive(&[("notes.txt", b"hello"), ("word/readme", b"")]);
        assert_eq!(detect(&plain), Detected::Refused(Refusal::OtherZip));
    }

    #[test]
    fn macro_enabled_packages_are_refused_by_their_parts() {
        let docm = renderpool_testkit::packages::docm("hello");
        let refused = Detected::Refused(Refusal::MacroEnabled("a VBA project"));
        assert_eq!(detect(&docm), refused);
        let xlsm = archive(&[
            ("[Content_Types].xml", b"<T/>"),
            ("xl/workbook.xml", b"<x/>"),
            ("xl/vbaProject.bin", b"vba"),
        ]);
        assert_eq!(detect(&xlsm), refused);
        let pptm = archive(&[("[Content_Types].xml", b"<T/>"), ("ppt/VBAPROJECT.BIN", b"")]);
        assert_eq!(detect(&pptm), refused);
        let xlm = archive(&[
            ("[Content_Types].xml", b"<T/>"),
            ("xl/workbook.xml", b"<x/>"),
            ("xl/macrosheets/sheet1.xml", b"<m/>"),
        ]);
        assert_eq!(detect(&xlm), Detected::Refused(Refusal::MacroEnabled("Excel 4 macro sheets")));
        // Legacy files with a VBA project.
        assert_eq!(detect(&compound(&["WordDocument", "1Table", "Macros"])), refused);
        assert_eq!(detect(&compound(&["Workbook", "_VBA_PROJECT_CUR"])), refused);
        // The plain ones still convert.
        let docx = renderpool_testkit::packages::docx("hello");
        assert_eq!(detect(&docx), Detected::Office(OfficeFormat::Docx));
    }

    #[test]
    fn odf_by_its_stored_mimetype_and_epub_refused() {
        let odf = |mime: &str| archive(&[("mimetype", mime.as_bytes()), ("content.xml", b"")]);
        let odt = odf("application/vnd.oasis.opendocument.text");
        assert_eq!(detect(&odt), Detected::Office(OfficeFormat::Odt));
        let ods = odf("application/vnd.oasis.opendocument.spreadsheet");
        assert_eq!(detect(&ods), Detected::Office(OfficeFormat::Ods));
        let odp = odf("application/vnd.oasis.opendocument.presentation");
        assert_eq!(detect(&odp), Detected::Office(OfficeFormat::Odp));
        assert_eq!(detect(&odf("application/epub+zip")), Detected::Refused(Refusal::Epub));
        assert!(matches!(
            detect(&odf("application/vnd.oasis.opendocument.formula")),
            Detected::Refused(Refusal::OtherOpenDocument(_))
        ));
        // A truncated package: its first entry still says ODT, but nothing can list it.
        let cut = &odt[..odt.len() - 10];
        let refused = detect(cut);
        assert!(matches!(&refused, Detected::Refused(r) if r.is_unreadable()), "{refused:?}");
    }

    #[test]
    fn legacy_formats_by_their_root_streams() {
        let doc = compound(&["1Table", "WordDocument", "\u{5}SummaryInformation"]);
        assert_eq!(detect(&doc), Detected::Office(OfficeFormat::Doc));
        assert_eq!(detect(&compound(&["Workbook"])), Detected::Office(OfficeFormat::Xls));
        assert_eq!(detect(&compound(&["Book"])), Detected::Office(OfficeFormat::Xls));
        let ppt = compound(&["Current User", "PowerPoint Document"]);
        assert_eq!(detect(&ppt), Detected::Office(OfficeFormat::Ppt));
        let locked = compound(&["EncryptionInfo", "EncryptedPackage", "\u{6}DataSpaces"]);
        assert_eq!(detect(&locked), Detected::Refused(Refusal::Encrypted));
        let msg = compound(&["__substg1.0_0037001F", "__properties_version1.0"]);
        assert_eq!(detect(&msg), Detected::Refused(Refusal::OtherCompound));
        let cut = &doc[..700];
        assert!(matches!(detect(cut), Detected::Refused(Refusal::Damaged(_))));
    }
}
