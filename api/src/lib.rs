//! The facts the render pool's parts share, each stated once: the render pod's environment
//! variables and the defaults the operator repeats in its CRD, the ports, the pinned versions
//! (read from the repository's `versions.env`), the image names built from them, and the durable
//! job contract (`jobs`: the message producers publish, and what they read back).
//!
//! Constants, types and pure functions only (serde for the job contract's JSON): the render
//! pod, the operator, the sizing formula and the tests all read these, so none of them can
//! drift from another.

pub mod gotenberg;
pub mod jobs;
pub mod quantity;
pub mod render_pod;
pub mod versions;

pub use quantity::Mebibytes;
