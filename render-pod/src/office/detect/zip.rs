//! Just enough of the ZIP format to tell Office packages apart and weigh them: the names and
//! declared sizes in the central directory, and the first local entry. Nothing is decompressed; every read is bounds-checked
//! and every loop is bounded by the input's length, so hostile bytes cost at most one pass.

use super::bytes::{u16_at, u32_at, u64_at};

const LOCAL_HEADER: u32 = 0x0403_4b50;
const CENTRAL_HEADER: u32 = 0x0201_4b50;
const END_RECORD: u32 = 0x0605_4b50;
const ZIP64_END_RECORD: u32 = 0x0606_4b50;
const ZIP64_LOCATOR: u32 = 0x0706_4b50;
/// The extra field that holds an entry's 64-bit sizes.
const ZIP64_EXTRA: u16 = 0x0001;
/// The end record is 22 bytes plus a comment of at most 65535 bytes.
const END_RECORD_LEN: usize = 22;
const MAX_COMMENT: usize = u16::MAX as usize;
/// More entries than any real document package has; a listing past it is refused.
pub const MAX_ENTRIES: u64 = 100_000;

/// True when the bytes start like a ZIP archive.
pub fn is_zip(bytes: &[u8]) -> bool {
    u32_at(bytes, 0) == Some(LOCAL_HEADER)
}

/// Why a ZIP archive's directory cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZipError {
    /// No end-of-central-directory record: cut short, or not a ZIP file.
    #[error("no end-of-central-directory record (the file is truncated or damaged)")]
    NoEndRecord,
    /// The end record points outside the file.
    #[error("the central directory lies outside the file")]
    DirectoryOutOfBounds,
    /// The end record does not point at a central directory entry.
    #[error("the end record does not point at the central directory (damaged archive)")]
    DirectoryMisplaced,
    /// An entry of the central directory is cut short or malformed.
    #[error("central directory entry {0} is damaged")]
    DamagedEntry(u64),
    /// More entries than [`MAX_ENTRIES`].
    #[error("the archive lists {0} entries, more than a document package has")]
    TooManyEntries(u64),
}

/// The first local entry of an archive, as ODF's `mimetype` rule reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirstEntry<'a> {
    /// Its file name.
    pub name: &'a [u8],
    /// Its contents when stored uncompressed with a known size, else `None`.
    pub stored: Option<&'a [u8]>,
}

/// The first local entry, if the archive starts with a readable local header.
pub fn first_entry(bytes: &[u8]) -> Option<FirstEntry<'_>> {
    if !is_zip(bytes) {
        return None;
    }
    let method = u16_at(bytes, 8)?;
    let compressed = usize::try_from(u32_at(bytes, 18)?).ok()?;
    let name_len = usize::from(u16_at(bytes, 26)?);
    let extra_len = usize::from(u16_at(bytes, 28)?);
    let name = bytes.get(30..30usize.checked_add(name_len)?)?;
    let data_start = 30usize.checked_add(name_len)?.checked_add(extra_len)?;
    let stored =
        (method == 0).then(|| bytes.get(data_start..data_start.checked_add(compressed)?)).flatten();
    Some(FirstEntry { name, stored })
}

/// Where the central directory is and how many entries it declares.
struct Directory {
    offset: usize,
    size: usize,
    entries: u64,
    end: usize,
}

/// Finds the end record: the last signature whose comment length reaches exactly to the end.
fn end_record(bytes: &[u8]) -> Option<usize> {
    let last = bytes.len().checked_sub(END_RECORD_LEN)?;
    let first = last.saturating_sub(MAX_COMMENT);
    (first..=last).rev().find(|&pos| {
        u32_at(bytes, pos) == Some(END_RECORD)
            && u16_at(bytes, pos + 20).map(usize::from) == Some(bytes.len() - pos - END_RECORD_LEN)
    })
}

fn directory(bytes: &[u8]) -> Result<Directory, ZipError> {
    let end = end_record(bytes).ok_or(ZipError::NoEndRecord)?;
    let field = |at: usize| u32_at(bytes, end + at).ok_or(ZipError::NoEndRecord);
    let entries16 = u16_at(bytes, end + 10).ok_or(ZipError::NoEndRecord)?;
    let (size, offset) = (field(12)?, field(16)?);
    let (entries, size, offset, directory_end) =
        if entries16 == u16::MAX || size == u32::MAX || offset == u32::MAX {
            zip64_directory(bytes, end)?
        } else {
            (u64::from(entries16), u64::from(size), u64::from(offset), end)
        };
    let offset = usize::try_from(offset).map_err(|_| ZipError::DirectoryOutOfBounds)?;
    let size = usize::try_from(size).map_err(|_| ZipError::DirectoryOutOfBounds)?;
    if offset.checked_add(size).is_none_or(|stop| stop > directory_end) {
        return Err(ZipError::DirectoryOutOfBounds);
    }
    if entries > MAX_ENTRIES {
        return Err(ZipError::TooManyEntries(entries));
    }
    Ok(Directory { offset, size, entries, end: directory_end })
}

/// The ZIP64 end record named by the locator just before the classic end record.
fn zip64_directory(bytes: &[u8], end: usize) -> Result<(u64, u64, u64, usize), ZipError> {
    let locator = end.checked_sub(20).ok_or(ZipError::NoEndRecord)?;
    if u32_at(bytes, locator) != Some(ZIP64_LOCATOR) {
        return Err(ZipError::NoEndRecord);
    }
    let record = u64_at(bytes, locator + 8)
        .and_then(|v| usize::try_from(v).ok())
        .filter(|&r| r < locator)
        .ok_or(ZipError::DirectoryOutOfBounds)?;
    if u32_at(bytes, record) != Some(ZIP64_END_RECORD) {
        return Err(ZipError::DirectoryMisplaced);
    }
    let read = |at: usize| u64_at(bytes, record + at).ok_or(ZipError::DirectoryOutOfBounds);
    Ok((read(32)?, read(40)?, read(48)?, record))
}

/// What the central directory declares of one entry (nothing here is checked against the
/// data: a lying directory is the reader's problem).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// Its file name.
    pub name: &'a [u8],
    /// Bytes of its data as stored.
    pub compressed: u64,
    /// Bytes of its data once inflated.
    pub uncompressed: u64,
}

/// The entries of the central directory, in order, with their sizes (ZIP64 extra fields
/// honoured).
pub fn entries(bytes: &[u8]) -> Result<Vec<Entry<'_>>, ZipError> {
    let dir = directory(bytes)?;
    let region =
        bytes.get(dir.offset..dir.offset + dir.size).ok_or(ZipError::DirectoryOutOfBounds)?;
    if dir.entries > 0 && u32_at(region, 0) != Some(CENTRAL_HEADER) {
        return Err(ZipError::DirectoryMisplaced);
    }
    let mut entries = Vec::with_capacity(usize::try_from(dir.entries).unwrap_or(0));
    let mut pos = 0usize;
    for index in 0..dir.entries {
        let damaged = || ZipError::DamagedEntry(index);
        if u32_at(region, pos) != Some(CENTRAL_HEADER) {
            return Err(damaged());
        }
        let len = |at: usize| u16_at(region, pos + at).map(usize::from).ok_or_else(damaged);
        let (name_len, extra_len, comment_len) = (len(28)?, len(30)?, len(32)?);
        let size = |at: usize| u32_at(region, pos + at).ok_or_else(damaged);
        let (compressed32, uncompressed32) = (size(20)?, size(24)?);
        let name_start = pos + 46;
        let name = region.get(name_start..name_start + name_len).ok_or_else(damaged)?;
        let extra_start = name_start + name_len;
        let extra = region.get(extra_start..extra_start + extra_len).ok_or_else(damaged)?;
        let (uncompressed, compressed) =
            zip64_sizes(extra, uncompressed32, compressed32).ok_or_else(damaged)?;
        entries.push(Entry { name, compressed, uncompressed });
        pos = extra_start + extra_len + comment_len;
        if pos > region.len() {
            return Err(damaged());
        }
    }
    debug_assert!(dir.offset + pos <= dir.end);
    Ok(entries)
}

/// The sizes of an entry: a 32-bit field of all ones is replaced, in order (uncompressed, then
/// compressed), by the next 8 bytes of its ZIP64 extra field; `None` when that field is
/// missing or too short.
fn zip64_sizes(extra: &[u8], uncompressed: u32, compressed: u32) -> Option<(u64, u64)> {
    if uncompressed != u32::MAX && compressed != u32::MAX {
        return Some((u64::from(uncompressed), u64::from(compressed)));
    }
    let mut at = 0usize;
    let field = loop {
        let id = u16_at(extra, at)?;
        let len = usize::from(u16_at(extra, at + 2)?);
        let data = extra.get(at + 4..(at + 4).checked_add(len)?)?;
        if id == ZIP64_EXTRA {
            break data;
        }
        at += 4 + len;
    };
    let mut next = 0usize;
    let mut take = |declared: u32| -> Option<u64> {
        if declared != u32::MAX {
            return Some(u64::from(declared));
        }
        let value = u64_at(field, next)?;
        next += 8;
        Some(value)
    };
    let uncompressed = take(uncompressed)?;
    let compressed = take(compressed)?;
    Some((uncompressed, compressed))
}

/// The file names of the central directory, in order.
pub fn names(bytes: &[u8]) -> Result<Vec<&[u8]>, ZipError> {
    Ok(entries(bytes)?.into_iter().map(|entry| entry.name).collect())
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A stored (uncompressed) ZIP archive of `entries`, built by hand for the tests.
    pub(crate) fn archive(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut central = Vec::new();
        for (name, data) in entries {
            let offset = out.len() as u32;
            let mut local = Vec::new();
            local.extend_from_slice(&LOCAL_HEADER.to_le_bytes());
            local.extend_from_slice(&[20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            local.extend_from_slice(&(data.len() as u32).to_le_bytes());
            local.extend_from_slice(&(data.len() as u32).to_le_bytes());
            local.extend_from_slice(&(name.len() as u16).to_le_bytes());
            local.extend_from_slice(&0u16.to_le_bytes());
            local.extend_from_slice(name.as_bytes());
            local.extend_from_slice(data);
            out.extend_from_slice(&local);
            central.extend_from_slice(&CENTRAL_HEADER.to_le_bytes());
            central.extend_from_slice(&[20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            central.extend_from_slice(&(data.len() as u32).to_le_bytes());
            central.extend_from_slice(&(data.len() as u32).to_le_bytes());
            central.extend_from_slice(&(name.len() as u16).to_le_bytes());
            central.extend_from_slice(&[0; 12]);
            central.extend_from_slice(&offset.to_le_bytes());
            central.extend_from_slice(name.as_bytes());
        }
        let cd_offset = out.len() as u32;
        out.extend_from_slice(&central);
        out.extend_from_slice(&END_RECORD.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        out.extend_from_slice(&(central.len() as u32).to_le_bytes());
        out.extend_from_slice(&cd_offset.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out
    }

    #[test]
    fn lists_names_and_the_stored_first_entry() {
        let zip = archive(&[("mimetype", b"application/vnd.oasis.opendocument.text"), ("a", b"x")]);
        assert_eq!(names(&zip).unwrap(), vec![&b"mimetype"[..], b"a"]);
        let first = first_entry(&zip).unwrap();
        assert_eq!(first.name, b"mimetype");
        assert_eq!(first.stored, Some(&b"application/vnd.oasis.opendocument.text"[..]));
    }

    #[test]
    fn damaged_archives_are_errors_not_panics() {
        let zip = archive(&[("word/document.xml", b"<w/>"), ("[Content_Types].xml", b"<T/>")]);
        // Every truncation and every single-byte corruption: an answer, never a panic.
        for cut in 0..zip.len() {
            let _ = names(&zip[..cut]);
            let _ = first_entry(&zip[..cut]);
        }
        for at in 0..zip.len() {
            let mut bad = zip.clone();
            bad[at] ^= 0xff;
            let _ = names(&bad);
        }
        assert_eq!(names(&zip[..zip.len() - 1]), Err(ZipError::NoEndRecord));
        assert_eq!(names(b"PK\x03\x04 and nothing else"), Err(ZipError::NoEndRecord));
    }

    #[test]
    fn a_misplaced_directory_is_refused() {
        // The end record's directory offset off by one, as in a damaged ODT of the corpus.
        let mut zip = archive(&[("mimetype", b"x"), ("content.xml", b"y")]);
        let at = zip.len() - 6;
        let offset = u32_at(&zip, at).unwrap() + 1;
        zip[at..at + 4].copy_from_slice(&offset.to_le_bytes());
        assert!(matches!(
            names(&zip),
            Err(ZipError::DirectoryMisplaced | ZipError::DirectoryOutOfBounds)
        ));
    }

    #[test]
    fn entry_counts_are_bounded() {
        let mut zip = archive(&[("a", b"")]);
        let end = zip.len() - 22;
        zip[end + 8..end + 12].copy_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        // 0xFFFF entries means ZIP64, whose locator is missing here.
        assert_eq!(names(&zip), Err(ZipError::NoEndRecord));
    }
}
