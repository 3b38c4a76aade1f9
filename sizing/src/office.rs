//! Office (Gotenberg) concurrency: LibreOffice converts one document at a time per instance.

/// Office conversions one render pod may have in flight so the Gotenberg pool is never
/// oversubscribed: `max(1, gotenberg_replicas / render_replicas)`. The pool as a whole then runs
/// at most `gotenberg_replicas` conversions, plus at most one per pod when there are more render
/// pods than Gotenberg replicas (each pod keeps one so Office input is never refused outright).
pub fn office_conversions_per_pod(gotenberg_replicas: u32, render_replicas: u32) -> u32 {
    gotenberg_replicas.checked_div(render_replicas).unwrap_or(gotenberg_replicas).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn office_share_divides_pool_and_never_drops_to_zero() {
        assert_eq!(office_conversions_per_pod(4, 2), 2);
        assert_eq!(office_conversions_per_pod(5, 2), 2);
        assert_eq!(office_conversions_per_pod(1, 3), 1);
        assert_eq!(office_conversions_per_pod(3, 0), 3);
        assert_eq!(office_conversions_per_pod(0, 0), 1);
        assert_eq!(office_conversions_per_pod(u32::MAX, 1), u32::MAX);
        assert_eq!(office_conversions_per_pod(1, u32::MAX), 1);
    }

    #[test]
    fn the_pool_never_runs_more_than_gotenberg_plus_one_per_pod() {
        for gotenberg in 1..=40u32 {
            for render in 1..=40u32 {
                let in_flight = office_conversions_per_pod(gotenberg, render) * render;
                // render <= gotenberg: at most gotenberg; more render pods: one each.
                assert!(in_flight <= gotenberg.max(render), "{gotenberg} over {render}");
            }
        }
    }
}
