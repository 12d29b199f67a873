//! Registry bodies read with hard limits and checked against what names them, so a
//! registry (or anyone between it and us) can neither make the agent buffer an
//! unbounded body nor slip it content other than what the descriptor promises:
//! small documents (manifests, indexes) are read into memory only up to a cap, and
//! blobs stream through a check of their size and digest on their way to containerd.

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt as _};

use stevedore_parsers::oci::{self, Descriptor};

use super::{
    digest::{self, Verifier},
    error::{BlobStream, RegistryError},
};

/// Reads `body` whole, refusing it as soon as it passes `limit` bytes: at most one
/// chunk beyond the limit is ever held. `declared` (the Content-Length) is checked
/// first, so an honest oversized body is refused before any byte is read.
pub async fn read_capped(
    body: impl Stream<Item = Result<Bytes, RegistryError>>,
    declared: Option<u64>,
    limit: u64,
    what: &'static str,
    reference: &str,
) -> Result<Bytes, RegistryError> {
    let too_large = || RegistryError::TooLarge {
        what,
        reference: reference.to_owned(),
        limit,
    };
    if declared.is_some_and(|len| len > limit) {
        return Err(too_large());
    }
    let mut body = std::pin::pin!(body);
    let mut data = BytesMut::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk?;
        if (data.len() + chunk.len()) as u64 > limit {
            return Err(too_large());
        }
        data.extend_from_slice(&chunk);
    }
    Ok(data.freeze())
}

/// Checks a fetched document against its digest (when it was fetched by one) and
/// returns the digest that names it: the one asked for, or the sha256 of the body for a
/// tag.
pub fn document_digest(
    body: &[u8],
    requested: &str,
    reference: &str,
) -> Result<String, RegistryError> {
    if !requested.contains(':') {
        return Ok(oci::sha256_digest(body));
    }
    digest::verify(requested, body).map_err(|err| content_error(reference, err))?;
    Ok(requested.to_owned())
}

/// Passes `body` through while checking it is exactly `blob.size` bytes that hash to
/// `blob.digest`: a longer body fails at the first byte past the size, a shorter one or
/// a digest mismatch fails at its end, before the consumer can commit it.
pub fn verified(
    body: BlobStream,
    blob: &Descriptor,
    reference: &str,
) -> Result<BlobStream, RegistryError> {
    verified_from(body, blob, 0, reference)
}

/// [`verified`] for the rest of a blob from byte `offset` on: the size is checked as
/// for a whole blob; the digest, which needs the bytes before `offset` too, is left to
/// the content store, which checks the whole blob before it commits it.
pub fn verified_from(
    body: BlobStream,
    blob: &Descriptor,
    offset: u64,
    reference: &str,
) -> Result<BlobStream, RegistryError> {
    let verifier = Verifier::new(&blob.digest).map_err(|err| content_error(reference, err))?;
    let check = Check {
        body,
        verifier: Some(verifier),
        hashing: offset == 0,
        seen: offset,
        size: blob.size,
        digest: blob.digest.clone(),
        reference: reference.to_owned(),
    };
    Ok(futures::stream::unfold(check, Check::step).boxed())
}

struct Check {
    body: BlobStream,
    /// `None` once the stream has ended (or failed).
    verifier: Option<Verifier>,
    /// Whether the whole blob passes here, so its digest can be checked.
    hashing: bool,
    seen: u64,
    size: u64,
    digest: String,
    reference: String,
}

impl Check {
    async fn step(mut self) -> Option<(Result<Bytes, RegistryError>, Self)> {
        self.verifier.as_ref()?;
        let item = match self.body.next().await {
            Some(Ok(chunk)) => self.chunk(chunk),
            Some(Err(err)) => Err(err),
            None => match self.end() {
                Ok(()) => return None,
                Err(err) => Err(err),
            },
        };
        if item.is_err() {
            self.verifier = None;
        }
        Some((item, self))
    }

    fn chunk(&mut self, chunk: Bytes) -> Result<Bytes, RegistryError> {
        self.seen += chunk.len() as u64;
        if self.seen > self.size {
            return Err(self.wrong_size("more than"));
        }
        if let Some(verifier) = self.verifier.as_mut().filter(|_| self.hashing) {
            verifier.update(&chunk);
        }
        Ok(chunk)
    }

    fn end(&mut self) -> Result<(), RegistryError> {
        let Some(verifier) = self.verifier.take() else {
            return Ok(());
        };
        if self.seen < self.size {
            return Err(self.wrong_size("only"));
        }
        if !self.hashing {
            return Ok(());
        }
        verifier
            .finish()
            .map_err(|err| content_error(&self.reference, err))
    }

    fn wrong_size(&self, relation: &str) -> RegistryError {
        RegistryError::Corrupt {
            reference: self.reference.clone(),
            detail: format!(
                "blob {} has {relation} {} bytes, but its descriptor says {}",
                self.digest,
                if relation == "only" {
                    self.seen
                } else {
                    self.size
                },
                self.size
            ),
        }
    }
}

/// A digest that could not be verified or did not match, as a registry error.
pub fn content_error(reference: &str, err: digest::DigestError) -> RegistryError {
    match err {
        digest::DigestError::Mismatch { .. } => RegistryError::Corrupt {
            reference: reference.to_owned(),
            detail: err.to_string(),
        },
        _ => RegistryError::Unverifiable {
            reference: reference.to_owned(),
            detail: err.to_string(),
        },
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn chunks(parts: &[&'static [u8]]) -> BlobStream {
        let items: Vec<Result<Bytes, RegistryError>> =
            parts.iter().map(|p| Ok(Bytes::from_static(p))).collect();
        futures::stream::iter(items).boxed()
    }

    async fn drain(stream: BlobStream) -> Result<Vec<u8>, RegistryError> {
        let mut out = Vec::new();
        let mut stream = stream;
        while let Some(chunk) = stream.next().await {
            out.extend_from_slice(&chunk?);
        }
        Ok(out)
    }

    fn blob(data: &[u8], size: u64) -> Descriptor {
        Descriptor::new("x", oci::sha256_digest(data), size)
    }

    #[tokio::test]
    async fn capped_reads_stop_past_the_limit() {
        let ok = read_capped(chunks(&[b"ab", b"cd"]), None, 4, "manifest", "r").await;
        assert_eq!(ok.unwrap(), Bytes::from_static(b"abcd"));
        let over = read_capped(chunks(&[b"ab", b"cde"]), None, 4, "manifest", "r:v1").await;
        let message = over.unwrap_err().to_string();
        assert!(message.contains("limit of 4 bytes"), "{message}");
        assert!(message.contains("r:v1"), "{message}");
        let declared = read_capped(chunks(&[]), Some(5), 4, "manifest", "r").await;
        assert!(matches!(declared, Err(RegistryError::TooLarge { .. })));
    }

    #[tokio::test]
    async fn blobs_must_match_their_descriptor() {
        let good = verified(chunks(&[b"he", b"llo"]), &blob(b"hello", 5), "r").unwrap();
        assert_eq!(drain(good).await.unwrap(), b"hello");
        let cases: [(&[&'static [u8]], Descriptor, &str); 4] = [
            (&[b"hello", b"!"], blob(b"hello", 5), "more than 5 bytes"),
            (&[b"hell"], blob(b"hello", 5), "only 4 bytes"),
            (&[b"jello"], blob(b"hello", 5), "does not match its digest"),
            (&[b"hello"], blob(b"hello", 4), "more than 4 bytes"),
        ];
        for (parts, descriptor, want) in cases {
            let stream = verified(chunks(parts), &descriptor, "r").unwrap();
            let err = drain(stream).await.unwrap_err().to_string();
            assert!(err.contains(want), "{want}: {err}");
        }
        // The rest of a blob is held to the blob's size; its digest is the store's.
        let rest = verified_from(chunks(&[b"llo"]), &blob(b"hello", 5), 2, "r").unwrap();
        assert_eq!(drain(rest).await.unwrap(), b"llo");
        let long = verified_from(chunks(&[b"llo!"]), &blob(b"hello", 5), 2, "r").unwrap();
        assert!(
            drain(long)
                .await
                .unwrap_err()
                .to_string()
                .contains("more than 5 bytes")
        );
        let short = verified_from(chunks(&[b"l"]), &blob(b"hello", 5), 2, "r").unwrap();
        assert!(
            drain(short)
                .await
                .unwrap_err()
                .to_string()
                .contains("only 3 bytes")
        );
        let unknown = Descriptor::new("x", "md5:5d41402abc4b2a76b9719d911017c592", 5);
        let refused = verified(chunks(&[b"hello"]), &unknown, "r").err().unwrap();
        assert!(refused.to_string().contains("only sha256 and sha512"));
    }
}
