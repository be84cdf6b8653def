//! The test-only hook into the log's file-system steps.

/// Test-only hook: called with a point's name before each file-system step of
/// the writer, its deleter and the follower, so that a test can pause those
/// steps or interleave them in an exact order.
#[cfg(test)]
pub(crate) type Seam = std::sync::Arc<dyn Fn(&'static str) + Send + Sync>;

/// Where a `Seam` is kept: nothing at all outside tests.
#[derive(Clone, Default)]
pub(super) struct Seams(#[cfg(test)] pub(super) Option<Seam>);

impl Seams {
    #[inline]
    pub(super) fn at(&self, _point: &'static str) {
        #[cfg(test)]
        if let Some(seam) = &self.0 {
            seam(_point);
        }
    }
}
