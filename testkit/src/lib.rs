//! Test support shared by the workspace's tests and benchmarks:
//!
//! - [`corpus`]: the test documents, real files fetched by pin from the registries they come
//!   from (`testdata/corpus.json` lists them, `scripts/fetch-corpus.sh` fetches and checks them).
//!   Every test and bench reads them through this module.

pub mod corpus;
