//! renderpool-operator: reconciles `RenderPool` resources into render and Gotenberg pools.
