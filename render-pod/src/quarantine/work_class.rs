//! Work classes: what a job asks of a document, by kind and cost, so that a conviction names
//! the work that failed and not only the bytes. A document that kills a worker at 1200 dpi is
//! refused at that cost and above, and still served `info` and ordinary pages.

use std::fmt;

use crate::ops::size::DEFAULT_DPI;
use crate::ops::{Op, RenderSize};

/// Render tiers above the first; past the last every render is in the last (a page at the
/// highest accepted dpi, 1200, is tier 3).
const TOP_TIER: u8 = 6;

/// Inches across a US Letter page: a render by width is classed as the dpi that width gives
/// such a page (the common case; a narrower page gets more pixels per inch, the same pixels).
const LETTER_WIDTH_IN: f32 = 8.5;

/// A class of work on a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkClass {
    /// Opening it and reading its page tree (`info`, a filmstrip's measure): the first step of
    /// every job, so a document convicted here is refused all work.
    Open,
    /// Its text.
    Text,
    /// A page image at a tier of resolution: tier 0 up to the default 150 dpi, each tier above
    /// it twice the dpi of the one below (four times the pixels).
    Render(u8),
    /// Stamping every page and saving the document.
    Watermark,
}

impl WorkClass {
    /// The class of `op`.
    pub fn of(op: &Op) -> Self {
        match op {
            Op::Info | Op::Measure { .. } => WorkClass::Open,
            Op::Extract { .. } => WorkClass::Text,
            Op::Render { size, .. } => WorkClass::Render(render_tier(*size)),
            Op::Watermark { .. } => WorkClass::Watermark,
        }
    }

    /// The classes whose conviction refuses this one: its own, [`WorkClass::Open`] (every job
    /// opens the document), and for a render every cheaper tier (what failed at a lower
    /// resolution fails at a higher one too). At most `TOP_TIER + 2` classes.
    pub fn refused_by(self) -> Vec<WorkClass> {
        let mut classes = vec![WorkClass::Open];
        match self {
            WorkClass::Open => {}
            WorkClass::Render(tier) => classes.extend((0..=tier).map(WorkClass::Render)),
            other => classes.push(other),
        }
        classes
    }
}

impl fmt::Display for WorkClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkClass::Open => f.write_str("any work"),
            WorkClass::Text => f.write_str("text extraction"),
            WorkClass::Render(0) => write!(f, "renders"),
            WorkClass::Render(tier) => {
                write!(f, "renders above {} dpi", tier_ceiling(tier.saturating_sub(1)))
            }
            WorkClass::Watermark => f.write_str("watermarking"),
        }
    }
}

/// The highest dpi of `tier`.
fn tier_ceiling(tier: u8) -> f32 {
    DEFAULT_DPI * f32::from(1u16 << tier.min(TOP_TIER))
}

/// The tier of a render at `size`: the first whose ceiling holds its dpi.
fn render_tier(size: RenderSize) -> u8 {
    let dpi = match size {
        RenderSize::Dpi(dpi) => dpi,
        RenderSize::Width(width) => width as f32 / LETTER_WIDTH_IN,
    };
    (0..TOP_TIER).find(|tier| dpi <= tier_ceiling(*tier)).unwrap_or(TOP_TIER)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::ImageFormat;

    fn render(size: RenderSize) -> WorkClass {
        WorkClass::of(&Op::Render { page: 1, size, format: ImageFormat::Png, quality: None })
    }

    #[test]
    fn renders_are_classed_by_resolution_in_doublings_from_150_dpi() {
        assert_eq!(render(RenderSize::Dpi(72.0)), WorkClass::Render(0));
        assert_eq!(render(RenderSize::Dpi(150.0)), WorkClass::Render(0));
        assert_eq!(render(RenderSize::Dpi(151.0)), WorkClass::Render(1));
        assert_eq!(render(RenderSize::Dpi(300.0)), WorkClass::Render(1));
        assert_eq!(render(RenderSize::Dpi(600.0)), WorkClass::Render(2));
        assert_eq!(render(RenderSize::Dpi(1200.0)), WorkClass::Render(3));
        // A width is the dpi it gives a Letter page: 1275 px is 150 dpi, 10000 px 1176 dpi.
        assert_eq!(render(RenderSize::Width(1275)), WorkClass::Render(0));
        assert_eq!(render(RenderSize::Width(10_000)), WorkClass::Render(3));
        // Nothing past the top tier, whatever the number.
        assert_eq!(render(RenderSize::Dpi(f32::INFINITY)), WorkClass::Render(TOP_TIER));
        assert_eq!(render(RenderSize::Width(u32::MAX)), WorkClass::Render(TOP_TIER));
    }

    #[test]
    fn other_ops_are_classed_by_kind() {
        assert_eq!(WorkClass::of(&Op::Info), WorkClass::Open);
        let measure = Op::Measure { pages: None, size: RenderSize::Dpi(150.0) };
        assert_eq!(WorkClass::of(&measure), WorkClass::Open);
        let extract = Op::Extract { pages: None, max_chars: None };
        assert_eq!(WorkClass::of(&extract), WorkClass::Text);
        let watermark = Op::Watermark { text: "x".into() };
        assert_eq!(WorkClass::of(&watermark), WorkClass::Watermark);
    }

    #[test]
    fn a_class_is_refused_by_its_own_conviction_an_open_one_and_cheaper_renders() {
        use WorkClass::*;
        assert_eq!(Open.refused_by(), [Open]);
        assert_eq!(Text.refused_by(), [Open, Text]);
        assert_eq!(Watermark.refused_by(), [Open, Watermark]);
        assert_eq!(Render(0).refused_by(), [Open, Render(0)]);
        assert_eq!(Render(3).refused_by(), [Open, Render(0), Render(1), Render(2), Render(3)]);
        // A 1200 dpi conviction refuses neither info, nor text, nor a 150 dpi page.
        for cheaper in [Open, Text, Render(0), Render(2)] {
            assert!(!cheaper.refused_by().contains(&Render(3)), "{cheaper:?}");
        }
    }

    #[test]
    fn the_class_reads_as_the_work_refused() {
        assert_eq!(WorkClass::Render(3).to_string(), "renders above 600 dpi");
        assert_eq!(WorkClass::Render(1).to_string(), "renders above 150 dpi");
        assert_eq!(WorkClass::Render(0).to_string(), "renders");
        assert_eq!(WorkClass::Open.to_string(), "any work");
    }
}
