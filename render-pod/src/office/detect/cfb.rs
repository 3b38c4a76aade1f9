//! Just enough of the Compound File Binary format (the container of `.doc`, `.xls`, `.ppt` and of
//! encrypted OOXML) to list the streams at its root: the header, the FAT chain of the directory
//! and the root storage's red-black tree. Every read is bounds-checked, every chain walk is
//! bounded by the file's sector count and every tree walk visits an entry at most once.

use super::bytes::{u16_at, u32_at};

/// The eight-byte signature every compound file starts with.
pub const MAGIC: [u8; 8] = [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];
const HEADER_DIFAT_ENTRIES: usize = 109;
const END_OF_CHAIN: u32 = 0xFFFF_FFFE;
const NO_STREAM: u32 = 0xFFFF_FFFF;
const DIRECTORY_ENTRY_LEN: usize = 128;
const ROOT_STORAGE: u8 = 5;

/// Why a compound file's directory cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CfbError {
    /// The header is cut short or names an impossible sector size.
    #[error("the compound file header is damaged")]
    Header,
    /// A FAT or directory sector lies outside the file, or a chain loops.
    #[error("the compound file's sector chains are damaged (truncated file?)")]
    Chain,
    /// The first directory entry is not the root storage.
    #[error("the compound file has no root directory entry")]
    NoRoot,
}

/// True when the bytes start with the compound file signature.
pub fn is_cfb(bytes: &[u8]) -> bool {
    bytes.starts_with(&MAGIC)
}

struct Reader<'a> {
    bytes: &'a [u8],
    shift: u32,
    /// Sectors the file can hold: bounds every chain walk.
    sectors: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Result<Self, CfbError> {
        if !is_cfb(bytes) {
            return Err(CfbError::Header);
        }
        let shift = u32::from(u16_at(bytes, 30).ok_or(CfbError::Header)?);
        if shift != 9 && shift != 12 {
            return Err(CfbError::Header);
        }
        let sectors = (bytes.len() >> shift).saturating_sub(1);
        Ok(Self { bytes, shift, sectors })
    }

    fn sector_len(&self) -> usize {
        1 << self.shift
    }

    fn sector(&self, id: u32) -> Result<&'a [u8], CfbError> {
        let index = usize::try_from(id).map_err(|_| CfbError::Chain)?;
        if index >= self.sectors {
            return Err(CfbError::Chain);
        }
        let start = (index + 1) << self.shift;
        self.bytes.get(start..start + self.sector_len()).ok_or(CfbError::Chain)
    }

    /// The sector holding the `n`th FAT sector's id: the header's 109, then the DIFAT chain.
    fn fat_sector_id(&self, n: usize) -> Result<u32, CfbError> {
        if n < HEADER_DIFAT_ENTRIES {
            return u32_at(self.bytes, 76 + n * 4).ok_or(CfbError::Header);
        }
        let per_difat = self.sector_len() / 4 - 1;
        let (mut hops, slot) =
            ((n - HEADER_DIFAT_ENTRIES) / per_difat, (n - HEADER_DIFAT_ENTRIES) % per_difat);
        let mut difat = u32_at(self.bytes, 68).ok_or(CfbError::Header)?;
        while hops > 0 {
            difat = u32_at(self.sector(difat)?, per_difat * 4).ok_or(CfbError::Chain)?;
            hops -= 1;
        }
        u32_at(self.sector(difat)?, slot * 4).ok_or(CfbError::Chain)
    }

    /// The sector after `id` in its chain.
    fn next(&self, id: u32) -> Result<u32, CfbError> {
        let index = usize::try_from(id).map_err(|_| CfbError::Chain)?;
        let per_fat = self.sector_len() / 4;
        let fat = self.sector(self.fat_sector_id(index / per_fat)?)?;
        u32_at(fat, (index % per_fat) * 4).ok_or(CfbError::Chain)
    }

    /// The directory stream, sector by sector, concatenated.
    fn directory(&self) -> Result<Vec<u8>, CfbError> {
        let mut id = u32_at(self.bytes, 48).ok_or(CfbError::Header)?;
        let mut out = Vec::new();
        let mut walked = 0usize;
        while id != END_OF_CHAIN {
            walked += 1;
            if walked > self.sectors {
                return Err(CfbError::Chain);
            }
            out.extend_from_slice(self.sector(id)?);
            id = self.next(id)?;
        }
        Ok(out)
    }
}

fn entry(directory: &[u8], id: u32) -> Option<&[u8]> {
    let start = usize::try_from(id).ok()?.checked_mul(DIRECTORY_ENTRY_LEN)?;
    directory.get(start..start.checked_add(DIRECTORY_ENTRY_LEN)?)
}

fn entry_name(entry: &[u8]) -> String {
    let len = usize::from(u16_at(entry, 64).unwrap_or(0)).min(64);
    let units: Vec<u16> =
        (0..len.saturating_sub(2) / 2).filter_map(|i| u16_at(entry, i * 2)).collect();
    String::from_utf16_lossy(&units)
}

/// The names of the streams and storages directly under the root storage.
pub fn root_names(bytes: &[u8]) -> Result<Vec<String>, CfbError> {
    let reader = Reader::new(bytes)?;
    let directory = reader.directory()?;
    let root = entry(&directory, 0).ok_or(CfbError::NoRoot)?;
    if root.get(66) != Some(&ROOT_STORAGE) {
        return Err(CfbError::NoRoot);
    }
    let count = directory.len() / DIRECTORY_ENTRY_LEN;
    let mut visited = vec![false; count];
    let mut names = Vec::new();
    let mut stack = vec![u32_at(root, 76).ok_or(CfbError::NoRoot)?];
    while let Some(id) = stack.pop() {
        let Some(slot) = usize::try_from(id).ok().and_then(|i| visited.get_mut(i)) else {
            continue; // NO_STREAM, or an id past the directory
        };
        if std::mem::replace(slot, true) {
            continue; // a loop in a damaged tree
        }
        let Some(e) = entry(&directory, id) else { continue };
        names.push(entry_name(e));
        for sibling in [u32_at(e, 68), u32_at(e, 72)].into_iter().flatten() {
            if sibling != NO_STREAM {
                stack.push(sibling);
            }
        }
    }
    Ok(names)
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A version 3 compound file (512-byte sectors) whose root holds `names`, as a balanced
    /// enough tree: each entry's right sibling is the next one.
    pub(crate) fn compound(names: &[&str]) -> Vec<u8> {
        let mut header = vec![0u8; 512];
        header[..8].copy_from_slice(&MAGIC);
        header[24..26].copy_from_slice(&0x3Eu16.to_le_bytes());
        header[26..28].copy_from_slice(&3u16.to_le_bytes());
        header[28..30].copy_from_slice(&0xFFFEu16.to_le_bytes());
        header[30..32].copy_from_slice(&9u16.to_le_bytes());
        header[32..34].copy_from_slice(&6u16.to_le_bytes());
        header[44..48].copy_from_slice(&1u32.to_le_bytes()); // one FAT sector
        header[48..52].copy_from_slice(&1u32.to_le_bytes()); // directory starts at sector 1
        header[60..64].copy_from_slice(&END_OF_CHAIN.to_le_bytes());
        header[68..72].copy_from_slice(&END_OF_CHAIN.to_le_bytes());
        for i in 0..HEADER_DIFAT_ENTRIES {
            let v = if i == 0 { 0 } else { NO_STREAM };
            header[76 + i * 4..80 + i * 4].copy_from_slice(&v.to_le_bytes());
        }
        let entries = names.len() + 1;
        let dir_sectors = entries.div_ceil(4);
        // Sector 0: the FAT; sectors 1..: the directory, chained.
        let mut fat = vec![0xFFu8; 512];
        fat[..4].copy_from_slice(&0xFFFF_FFFDu32.to_le_bytes());
        for s in 0..dir_sectors {
            let next = if s + 1 == dir_sectors { END_OF_CHAIN } else { (s + 2) as u32 };
            fat[(s + 1) * 4..(s + 2) * 4].copy_from_slice(&next.to_le_bytes());
        }
        let mut dir = vec![0u8; dir_sectors * 512];
        let mut put = |id: usize, name: &str, kind: u8, right: u32, child: u32| {
            let e = &mut dir[id * 128..(id + 1) * 128];
            let units: Vec<u16> = name.encode_utf16().collect();
            for (i, u) in units.iter().enumerate() {
                e[i * 2..i * 2 + 2].copy_from_slice(&u.to_le_bytes());
            }
            e[64..66].copy_from_slice(&(((units.len() + 1) * 2) as u16).to_le_bytes());
            e[66] = kind;
            e[68..72].copy_from_slice(&NO_STREAM.to_le_bytes());
            e[72..76].copy_from_slice(&right.to_le_bytes());
            e[76..80].copy_from_slice(&child.to_le_bytes());
        };
        put(0, "Root Entry", ROOT_STORAGE, NO_STREAM, if names.is_empty() { NO_STREAM } else { 1 });
        for (i, name) in names.iter().enumerate() {
            let right = if i + 1 == names.len() { NO_STREAM } else { (i + 2) as u32 };
            put(i + 1, name, 2, right, NO_STREAM);
        }
        [header, fat, dir].concat()
    }

    #[test]
    fn lists_the_root_streams() {
        let file = compound(&["WordDocument", "1Table", "\u{5}SummaryInformation", "Data", "x"]);
        let names = root_names(&file).unwrap();
        assert_eq!(names.len(), 5);
        assert!(names.contains(&"WordDocument".to_string()));
    }

    #[test]
    fn damaged_files_are_errors_not_panics() {
        let file = compound(&["Workbook", "a", "b", "c", "d", "e", "f"]);
        for cut in 0..file.len() {
            let _ = root_names(&file[..cut]);
        }
        for at in (0..file.len()).step_by(3) {
            let mut bad = file.clone();
            bad[at] ^= 0xff;
            let _ = root_names(&bad);
        }
        assert_eq!(root_names(&file[..600]), Err(CfbError::Chain));
        assert_eq!(root_names(&MAGIC), Err(CfbError::Header));
    }

    #[test]
    fn a_looping_chain_or_tree_ends() {
        let mut file = compound(&["a", "b"]);
        // FAT: the directory sector points back at itself.
        file[512 + 4..512 + 8].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(root_names(&file), Err(CfbError::Chain));
        let mut file = compound(&["a", "b"]);
        // Entry 2's right sibling points back at entry 1.
        let e2 = 1024 + 2 * 128;
        file[e2 + 72..e2 + 76].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(root_names(&file).unwrap().len(), 2);
    }
}
