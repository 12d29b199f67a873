//! Random names for the pods a pod-set kind creates: CloneSet's instance ids and the
//! DaemonSet's pod name suffixes, five characters of Kubernetes' own alphabet. The
//! randomness is an argument of the pure builder, so a test fixes it.

use std::collections::BTreeSet;
use std::hash::{BuildHasher as _, Hasher as _};

/// The alphabet of instance ids: `k8s.io/apimachinery/pkg/util/rand`'s (no vowels, no
/// look-alikes), so ids never spell words and names stay DNS labels.
const ID_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A fresh instance id: five characters of [`ID_ALPHABET`] not in `taken`, drawn from
/// `random` (called again while the id drawn is taken). The caller owns the randomness,
/// so the same draws give the same id.
pub fn fresh_instance_id(taken: &BTreeSet<String>, random: &mut dyn FnMut() -> u64) -> String {
    loop {
        let mut bits = random();
        let id: String = (0..5)
            .map(|_| {
                let c = ID_ALPHABET[usize::try_from(bits % 27).unwrap_or(0)];
                bits /= 27;
                char::from(c)
            })
            .collect();
        if !taken.contains(&id) {
            return id;
        }
    }
}

/// 64 random bits: a randomly keyed hasher (`RandomState`) over the wall clock, so two
/// draws within one process differ too.
pub fn random_u64() -> u64 {
    let mut hasher = std::hash::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish()
}

#[cfg(test)]
#[path = "instance_id_tests.rs"]
mod tests;
