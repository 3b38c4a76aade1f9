//! Page selections such as `1-3,7`: parsed and bounded before any document work.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::OpError;

/// A set of 1-based pages, kept as sorted, merged, inclusive ranges.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PageSelection {
    ranges: Vec<PageRange>,
}

/// One inclusive range of 1-based pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PageRange {
    /// First page, at least 1.
    pub first: u32,
    /// Last page, at least `first`.
    pub last: u32,
}

impl PageSelection {
    /// Parses `N`, `A-B` and comma-separated lists of them; page 0, reversed ranges and other
    /// syntax errors are [`OpError::InvalidRequest`].
    pub fn parse(s: &str) -> Result<Self, OpError> {
        let mut ranges = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            let (first, last) = match part.split_once('-') {
                Some((a, b)) => (parse_page(a)?, parse_page(b)?),
                None => {
                    let page = parse_page(part)?;
                    (page, page)
                }
            };
            if last < first {
                return Err(OpError::invalid(format!("page range {part:?} is reversed")));
            }
            ranges.push(PageRange { first, last });
        }
        Ok(Self::from_ranges(ranges))
    }

    /// Every page from 1 to `page_count` (empty when the document has no pages).
    pub fn all(page_count: u32) -> Self {
        Self::from_ranges(if page_count == 0 {
            Vec::new()
        } else {
            vec![PageRange { first: 1, last: page_count }]
        })
    }

    /// Sorts and merges overlapping or adjacent ranges so that `count` is exact.
    fn from_ranges(mut ranges: Vec<PageRange>) -> Self {
        ranges.sort_by_key(|r| r.first);
        let mut merged: Vec<PageRange> = Vec::with_capacity(ranges.len());
        for range in ranges {
            match merged.last_mut() {
                Some(prev) if u64::from(range.first) <= u64::from(prev.last) + 1 => {
                    prev.last = prev.last.max(range.last);
                }
                _ => merged.push(range),
            }
        }
        Self { ranges: merged }
    }

    /// The merged ranges, ascending.
    pub fn ranges(&self) -> &[PageRange] {
        &self.ranges
    }

    /// How many distinct pages are named (cheap: checked before any work).
    pub fn count(&self) -> u64 {
        self.ranges.iter().map(|r| u64::from(r.last - r.first) + 1).sum()
    }

    /// The pages in ascending order; [`OpError::PageOutOfRange`] names the first page past the
    /// end of a document of `page_count` pages.
    pub fn resolve(&self, page_count: u32) -> Result<Vec<u32>, OpError> {
        if let Some(past) = self.ranges.iter().find(|r| r.last > page_count) {
            let page = past.first.max(page_count.saturating_add(1));
            return Err(OpError::PageOutOfRange { page, page_count });
        }
        Ok(self.ranges.iter().flat_map(|r| r.first..=r.last).collect())
    }
}

fn parse_page(s: &str) -> Result<u32, OpError> {
    let s = s.trim();
    match s.parse::<u32>() {
        Ok(0) => Err(OpError::invalid("pages are numbered from 1")),
        Ok(page) => Ok(page),
        Err(_) => Err(OpError::invalid(format!("{s:?} is not a page number"))),
    }
}

impl fmt::Display for PageSelection {
    /// The canonical form, e.g. `1-3,7`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if r.first == r.last {
                write!(f, "{}", r.first)?;
            } else {
                write!(f, "{}-{}", r.first, r.last)?;
            }
        }
        Ok(())
    }
}

impl std::str::FromStr for PageSelection {
    type Err = OpError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_single_pages_and_ranges() {
        let sel = PageSelection::parse("1-3,7").unwrap();
        assert_eq!(sel.count(), 4);
        assert_eq!(sel.resolve(10).unwrap(), vec![1, 2, 3, 7]);
        assert_eq!(sel.to_string(), "1-3,7");
    }

    #[test]
    fn merges_overlaps_and_sorts() {
        let sel = PageSelection::parse(" 9, 2-4 ,3-5,6").unwrap();
        assert_eq!(sel.to_string(), "2-6,9");
        assert_eq!(sel.count(), 6);
        assert_eq!(sel.resolve(9).unwrap(), vec![2, 3, 4, 5, 6, 9]);
    }

    #[test]
    fn rejects_bad_syntax_and_page_zero() {
        for bad in ["", "0", "1-0", "3-2", "a", "1,,2", "1-", "-3", "1-2-3", "4294967296", "1.5"] {
            let err = PageSelection::parse(bad).unwrap_err();
            assert_eq!(err.code(), "invalid_request", "{bad:?} gave {err:?}");
        }
    }

    #[test]
    fn counts_huge_ranges_without_expanding_them() {
        let sel = PageSelection::parse("1-4294967295").unwrap();
        assert_eq!(sel.count(), 4_294_967_295);
    }

    #[test]
    fn resolve_names_the_first_page_past_the_end() {
        let sel = PageSelection::parse("2,5-8").unwrap();
        assert_eq!(sel.resolve(6).unwrap_err(), OpError::PageOutOfRange { page: 7, page_count: 6 });
        let sel = PageSelection::parse("12-13").unwrap();
        assert_eq!(
            sel.resolve(6).unwrap_err(),
            OpError::PageOutOfRange { page: 12, page_count: 6 }
        );
    }

    #[test]
    fn all_covers_the_document() {
        assert_eq!(PageSelection::all(3).resolve(3).unwrap(), vec![1, 2, 3]);
        assert_eq!(PageSelection::all(0).count(), 0);
    }
}
