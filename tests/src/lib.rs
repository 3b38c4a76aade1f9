//! End-to-end test support: the local control plane harness.
