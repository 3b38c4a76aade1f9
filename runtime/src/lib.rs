//! What the render pod and the operator share at run time, one module per job: the log set-up
//! ([`logging`]), binding the listen address on both address families ([`listen`]) and the
//! pacing of retries and refusals ([`pacing`]). None of the three knows the others.

pub mod listen;
pub mod logging;
pub mod pacing;
