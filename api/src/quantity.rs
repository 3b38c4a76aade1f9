//! Memory amounts that are written both as bytes (the render pod's flags) and as a Kubernetes
//! quantity (the CRD's defaults), so neither form is a second copy of the other.

use std::fmt;

/// A whole number of mebibytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Mebibytes(pub u32);

impl Mebibytes {
    /// The amount in bytes.
    pub const fn bytes(self) -> u64 {
        // Widening: a u32 of mebibytes always fits in 64 bits of bytes.
        (self.0 as u64) << 20
    }
}

/// The Kubernetes quantity, e.g. `512Mi`.
impl fmt::Display for Mebibytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}Mi", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_and_quantity_are_the_same_amount() {
        assert_eq!(Mebibytes(512).bytes(), 536_870_912);
        assert_eq!(Mebibytes(512).to_string(), "512Mi");
        assert_eq!(Mebibytes(u32::MAX).bytes(), u64::from(u32::MAX) * 1024 * 1024);
    }
}
