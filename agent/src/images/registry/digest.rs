//! Content digests as the OCI image spec defines them (`algorithm:encoded`), and their
//! verification while content streams past. The spec registers `sha256` and `sha512`;
//! any other algorithm is refused rather than trusted unchecked.

use sha2::{Digest as _, Sha256, Sha512};

/// Why a digest or the content it names was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestError {
    #[error(
        "digest {digest:?} uses an algorithm the agent cannot verify (only sha256 and sha512 are)"
    )]
    UnsupportedAlgorithm { digest: String },
    #[error("digest {digest:?} is malformed: {algorithm} needs {hex_len} lowercase hex digits")]
    Malformed {
        digest: String,
        algorithm: &'static str,
        hex_len: usize,
    },
    #[error("content does not match its digest {expected} (got {actual})")]
    Mismatch { expected: String, actual: String },
}

/// The algorithms the OCI image spec registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Sha256,
    Sha512,
}

impl Algorithm {
    fn name(self) -> &'static str {
        match self {
            Self::Sha256 => "sha256",
            Self::Sha512 => "sha512",
        }
    }

    fn hex_len(self) -> usize {
        match self {
            Self::Sha256 => 64,
            Self::Sha512 => 128,
        }
    }
}

/// Parses `digest`, checking its algorithm is one the agent verifies and its encoded
/// part has that algorithm's length in lowercase hex (as the spec requires).
pub fn parse(digest: &str) -> Result<Algorithm, DigestError> {
    let (name, encoded) = digest.split_once(':').unwrap_or((digest, ""));
    let algorithm = match name {
        "sha256" => Algorithm::Sha256,
        "sha512" => Algorithm::Sha512,
        _ => {
            return Err(DigestError::UnsupportedAlgorithm {
                digest: digest.to_owned(),
            });
        }
    };
    let lower_hex = |c: u8| c.is_ascii_digit() || (b'a'..=b'f').contains(&c);
    if encoded.len() != algorithm.hex_len() || !encoded.bytes().all(lower_hex) {
        return Err(DigestError::Malformed {
            digest: digest.to_owned(),
            algorithm: algorithm.name(),
            hex_len: algorithm.hex_len(),
        });
    }
    Ok(algorithm)
}

/// Hashes content as it streams and compares it with the expected digest at the end.
#[derive(Clone)]
pub struct Verifier {
    expected: String,
    state: State,
}

#[derive(Clone)]
enum State {
    Sha256(Sha256),
    Sha512(Sha512),
}

impl Verifier {
    /// A verifier for content named by `expected` (refused if its algorithm is unknown).
    pub fn new(expected: &str) -> Result<Self, DigestError> {
        let state = match parse(expected)? {
            Algorithm::Sha256 => State::Sha256(Sha256::new()),
            Algorithm::Sha512 => State::Sha512(Sha512::new()),
        };
        Ok(Self {
            expected: expected.to_owned(),
            state,
        })
    }

    pub fn update(&mut self, data: &[u8]) {
        match &mut self.state {
            State::Sha256(h) => h.update(data),
            State::Sha512(h) => h.update(data),
        }
    }

    /// Whether everything seen hashes to the expected digest.
    pub fn finish(self) -> Result<(), DigestError> {
        let (name, hash) = match self.state {
            State::Sha256(h) => ("sha256", hex::encode(h.finalize())),
            State::Sha512(h) => ("sha512", hex::encode(h.finalize())),
        };
        let actual = format!("{name}:{hash}");
        if actual == self.expected {
            Ok(())
        } else {
            Err(DigestError::Mismatch {
                expected: self.expected,
                actual,
            })
        }
    }
}

/// Verifies `data` against `expected` in one go.
pub fn verify(expected: &str, data: &[u8]) -> Result<(), DigestError> {
    let mut verifier = Verifier::new(expected)?;
    verifier.update(data);
    verifier.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELLO_256: &str =
        "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
    const HELLO_512: &str = "sha512:9b71d224bd62f3785d96d46ad3ea3d73319bfbc2890caadae2dff72519673ca72323c3d99ba5c11d7c7acc6e14b8c5da0c4663475c2e5c3adef46f73bcdec043";

    #[test]
    fn both_spec_algorithms_are_verified() {
        assert_eq!(verify(HELLO_256, b"hello"), Ok(()));
        assert_eq!(verify(HELLO_512, b"hello"), Ok(()));
        let mut streamed = Verifier::new(HELLO_512).expect("sha512 is known");
        streamed.update(b"hel");
        streamed.update(b"lo");
        assert_eq!(streamed.finish(), Ok(()));
        assert!(matches!(
            verify(HELLO_512, b"hellO"),
            Err(DigestError::Mismatch { .. })
        ));
        assert!(matches!(
            verify(HELLO_256, b""),
            Err(DigestError::Mismatch { .. })
        ));
    }

    #[test]
    fn unknown_and_malformed_digests_are_refused() {
        let cases = [
            ("md5:5d41402abc4b2a76b9719d911017c592", "algorithm"),
            ("sha384:abc", "algorithm"),
            ("hello", "algorithm"),
            ("", "algorithm"),
            ("sha256:abc", "malformed"),
            (
                "sha256:2CF24DBA5FB0A30E26E83B2AC5B9E29E1B161E5C1FA7425E73043362938B9824",
                "malformed",
            ),
            (&HELLO_512[..70], "malformed"),
        ];
        for (digest, want) in cases {
            let err = parse(digest).expect_err(digest).to_string();
            assert!(err.contains(want), "{digest}: {err}");
        }
    }
}
