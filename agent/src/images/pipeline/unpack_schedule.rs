//! Which step of a pull's unpacking may run now, as containerd's own unpacker decides it:
//! a layer is unpacked as soon as it is downloaded and the layer below it is unpacked,
//! while the layers above it still download. Pure: the pull feeds it what finished and
//! carries out the step it returns.

use crate::images::progress::Phase;

/// One step of the unpack lane, which runs one step at a time (each layer is applied on
/// top of the one below it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Read the downloaded config for the layers' diff IDs.
    ReadConfig,
    /// Unpack layer `n` (manifest order, from the bottom).
    Unpack(usize),
}

/// The state of one pull's downloads and unpacking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Committed blobs, in progress order: the config, then each layer.
    downloaded: Vec<bool>,
    config_read: bool,
    /// Layers unpacked, from the bottom.
    unpacked: usize,
    /// The step under way.
    running: Option<Step>,
}

impl Schedule {
    pub fn new(layers: usize) -> Self {
        Self {
            downloaded: vec![false; layers + 1],
            config_read: false,
            unpacked: 0,
            running: None,
        }
    }

    /// Blob `blob` (0 the config, then the layers) is committed.
    pub fn downloaded(&mut self, blob: usize) {
        if let Some(done) = self.downloaded.get_mut(blob) {
            *done = true;
        }
    }

    /// The step to start now, if the lane is free and one may run; it is under way until
    /// [`Schedule::finished`].
    pub fn start(&mut self) -> Option<Step> {
        if self.running.is_some() {
            return None;
        }
        self.running = next_step(&self.downloaded, self.config_read, self.unpacked);
        self.running
    }

    /// The step under way finished.
    pub fn finished(&mut self) {
        match self.running.take() {
            Some(Step::ReadConfig) => self.config_read = true,
            Some(Step::Unpack(_)) => self.unpacked += 1,
            None => {}
        }
    }

    /// Every blob is downloaded and every layer unpacked.
    pub fn complete(&self) -> bool {
        self.all_downloaded() && self.config_read && self.unpacked + 1 == self.downloaded.len()
    }

    /// Layers unpacked, from the bottom.
    pub fn unpacked(&self) -> usize {
        self.unpacked
    }

    pub fn all_downloaded(&self) -> bool {
        self.downloaded.iter().all(|d| *d)
    }

    /// The phase watchers see: downloading while any blob's bytes are still to come,
    /// even when lower layers are unpacking meanwhile; unpacking once all are in.
    pub fn phase(&self) -> Phase {
        if self.all_downloaded() {
            Phase::Unpacking
        } else {
            Phase::Downloading
        }
    }
}

/// The rule: the config is read once it is in; layer `n` is unpacked once the diff IDs
/// are known, layers below `n` are unpacked (`unpacked == n`) and layer `n` is in.
pub fn next_step(downloaded: &[bool], config_read: bool, unpacked: usize) -> Option<Step> {
    if !config_read {
        return (downloaded.first() == Some(&true)).then_some(Step::ReadConfig);
    }
    (downloaded.get(unpacked + 1) == Some(&true)).then_some(Step::Unpack(unpacked))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_step_waits_only_for_its_own_blob_and_the_layer_below() {
        const T: bool = true;
        const F: bool = false;
        // (case, downloaded: config then layers, config read, layers unpacked, expected)
        type Case = (&'static str, &'static [bool], bool, usize, Option<Step>);
        let cases: [Case; 10] = [
            ("nothing in yet", &[F, F, F], F, 0, None),
            ("layers in, config not", &[F, T, T], F, 0, None),
            ("config in", &[T, F, F], F, 0, Some(Step::ReadConfig)),
            ("config read, bottom layer not in", &[T, F, T], T, 0, None),
            (
                "bottom layer in, the rest downloading",
                &[T, T, F],
                T,
                0,
                Some(Step::Unpack(0)),
            ),
            (
                "second layer in before the first is unpacked",
                &[T, T, T],
                T,
                0,
                Some(Step::Unpack(0)),
            ),
            (
                "first unpacked, second still downloading",
                &[T, T, F],
                T,
                1,
                None,
            ),
            (
                "first unpacked, second in",
                &[T, T, T],
                T,
                1,
                Some(Step::Unpack(1)),
            ),
            ("all unpacked", &[T, T, T], T, 2, None),
            ("an image without layers", &[T], T, 0, None),
        ];
        for (case, downloaded, config_read, unpacked, expected) in cases {
            assert_eq!(
                next_step(downloaded, config_read, unpacked),
                expected,
                "{case}"
            );
        }
    }

    #[test]
    fn one_step_runs_at_a_time_and_layers_unpack_bottom_up() {
        let mut schedule = Schedule::new(2);
        assert_eq!(schedule.start(), None);
        schedule.downloaded(2);
        schedule.downloaded(0);
        assert_eq!(schedule.start(), Some(Step::ReadConfig));
        schedule.downloaded(1);
        assert_eq!(schedule.start(), None, "the lane is busy");
        schedule.finished();
        assert_eq!(schedule.start(), Some(Step::Unpack(0)));
        schedule.finished();
        assert_eq!(schedule.start(), Some(Step::Unpack(1)));
        assert!(!schedule.complete());
        schedule.finished();
        assert!(schedule.complete());
        assert_eq!(schedule.start(), None);
    }

    #[test]
    fn the_phase_is_downloading_until_every_blob_is_in() {
        let mut schedule = Schedule::new(2);
        schedule.downloaded(0);
        schedule.downloaded(1);
        schedule.start();
        schedule.finished();
        schedule.start();
        assert_eq!(
            schedule.phase(),
            Phase::Downloading,
            "layer 0 unpacks, layer 1 downloads"
        );
        schedule.downloaded(2);
        assert_eq!(schedule.phase(), Phase::Unpacking);
    }
}
