//! Randomness for fresh instance ids: the one impure input of pod naming, kept out of the
//! pure builders in `pods` (which take it as an argument).

use std::hash::{BuildHasher as _, Hasher as _};

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
