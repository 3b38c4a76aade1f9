//! Test support shared by the workspace's tests and benchmarks:
//!
//! - [`corpus`]: the test documents, real files fetched by pin from the registries they come
//!   from (`testdata/corpus.json` lists them, `scripts/fetch-corpus.sh` fetches and checks them).
//!   Every test and bench reads them through this module.
//! - [`skip()`]: a test that cannot run its real part on this machine says so with a capability
//!   name and a reason; `scripts/test.sh` counts and prints every skip, and a machine that
//!   declares the capability (`RENDERPOOL_CAPABILITIES`, set by `.ci/run`) fails the test
//!   instead.
//! - [`metrics`]: one metric's value from a Prometheus text exposition; a metric that is not
//!   there is an error naming what is, never a zero.
//! - [`wait`]: the one poll loop: waits for a condition with a bound, and a timeout names what
//!   was awaited and the last value seen.
//! - [`cgroup`]: cgroup v1 cpu and memory groups (a CFS quota, a memory limit) to hold a process
//!   in, as a pod's container is held; removed on drop, a missing controller a recorded skip.
//! - [`bombs`]: resource-bomb PDFs built byte by byte (and a long ordinary one), for the render
//!   pod's tests on a host process and on the real node alike.
//! - [`packages`]: Office packages built entry by entry: ordinary and macro-enabled DOCX files,
//!   ZIP bombs with an honest or a lying central directory, and a document slow to lay out.
//! - [`machine`]: the load average a benchmark prints beside its figures.
//! - [`modgraph`]: a crate's module import graph from its sources, and the layering checks
//!   `tests/architecture.rs` runs against `docs/architecture.md`.

pub mod bombs;
pub mod cgroup;
pub mod corpus;
pub mod machine;
pub mod metrics;
pub mod modgraph;
pub mod packages;
mod skip;
pub mod wait;

pub use skip::{CAPABILITIES_ENV, LOG_ENV, capability, skip};
