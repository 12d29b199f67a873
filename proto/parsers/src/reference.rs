//! Image references: parsed, validated and normalised per the distribution reference
//! grammar (`github.com/distribution/reference`), the way containerd's CRI and Docker
//! read them, before anything else touches them.
//!
//! ```text
//! reference        := name [ ":" tag ] [ "@" digest ]
//! name             := [domain "/"] path-component ["/" path-component]*
//! domain           := domain-component ["." domain-component]* [":" port-number]
//! domain-component := /([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])/
//! path-component   := /[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*/
//! tag              := /[\w][\w.-]{0,127}/
//! digest           := algorithm ":" hex   (sha256: 64 lowercase hex, sha512: 128)
//! ```
//!
//! Short names are normalised as Docker does: `nginx` → `docker.io/library/nginx:latest`,
//! `user/app` → `docker.io/user/app:latest`. IPv6 literal domains are not accepted.

use std::fmt;

/// Registry of names without a domain.
pub const DEFAULT_DOMAIN: &str = "docker.io";
/// Repository prefix of single-component names on the default registry.
const OFFICIAL_REPO_PREFIX: &str = "library/";
/// Tag of references that name neither a tag nor a digest.
pub const DEFAULT_TAG: &str = "latest";
/// Longest name (domain and path) the grammar allows.
pub const NAME_TOTAL_LENGTH_MAX: usize = 255;
/// Longest tag the grammar allows.
const TAG_LENGTH_MAX: usize = 128;

/// Why a string is not a valid image reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    #[error("image reference is empty")]
    Empty,
    #[error("image name is {len} characters long, more than the {NAME_TOTAL_LENGTH_MAX} allowed")]
    NameTooLong { len: usize },
    #[error("invalid registry domain {domain:?}")]
    InvalidDomain { domain: String },
    #[error("invalid registry port in {domain:?}")]
    InvalidPort { domain: String },
    #[error("repository name {name:?} must be lowercase")]
    Uppercase { name: String },
    #[error("invalid repository path component {component:?} in {name:?}")]
    InvalidPathComponent { name: String, component: String },
    #[error("invalid tag {tag:?}: must match [A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}}")]
    InvalidTag { tag: String },
    #[error("invalid digest {digest:?}: {reason}")]
    InvalidDigest {
        digest: String,
        reason: &'static str,
    },
    #[error("{name:?} is a 64-character hexadecimal string, which cannot be a repository name")]
    HexName { name: String },
}

/// A validated, normalised image reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    domain: String,
    path: String,
    tag: Option<String>,
    digest: Option<String>,
}

impl Reference {
    /// Parses `input`, normalising short names and adding the `latest` tag when the
    /// reference names neither a tag nor a digest.
    pub fn parse_normalized(input: &str) -> Result<Self, ReferenceError> {
        if input.is_empty() {
            return Err(ReferenceError::Empty);
        }
        let (rest, digest) = match input.split_once('@') {
            Some((rest, digest)) => {
                validate_digest(digest)?;
                (rest, Some(digest.to_owned()))
            }
            None => (input, None),
        };
        // A ':' after the last '/' starts the tag; one before it is a registry port.
        let (name, tag) = match rest.rfind(':') {
            Some(colon) if !rest[colon..].contains('/') => {
                (&rest[..colon], Some(rest[colon + 1..].to_owned()))
            }
            _ => (rest, None),
        };
        if let Some(tag) = &tag {
            validate_tag(tag)?;
        }
        if name.is_empty() {
            return Err(ReferenceError::Empty);
        }
        if name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ReferenceError::HexName {
                name: name.to_owned(),
            });
        }
        let (domain, path) = split_domain(name);
        validate_domain(&domain)?;
        validate_path(&path)?;
        let total = domain.len() + 1 + path.len();
        if total > NAME_TOTAL_LENGTH_MAX {
            return Err(ReferenceError::NameTooLong { len: total });
        }
        let tag = match (&tag, &digest) {
            (None, None) => Some(DEFAULT_TAG.to_owned()),
            _ => tag,
        };
        Ok(Self {
            domain,
            path,
            tag,
            digest,
        })
    }

    /// Registry host, with the port if one was given (`docker.io`, `127.0.0.1:5000`).
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// Repository path within the registry (`library/nginx`).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The tag, if the reference names one (always, unless it names only a digest).
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The digest, if the reference pins one.
    pub fn digest(&self) -> Option<&str> {
        self.digest.as_deref()
    }

    /// Full repository name, `domain/path`.
    pub fn repository(&self) -> String {
        format!("{}/{}", self.domain, self.path)
    }

    /// `repository:tag`, the image record CRI lists as a repo tag; `None` for
    /// digest-only references.
    pub fn repo_tag(&self) -> Option<String> {
        self.tag
            .as_ref()
            .map(|tag| format!("{}:{tag}", self.repository()))
    }

    /// `repository@digest`, the image record CRI lists as a repo digest.
    pub fn repo_digest(&self, manifest_digest: &str) -> String {
        format!("{}@{manifest_digest}", self.repository())
    }

    /// What to ask the registry's manifest endpoint for: the digest when pinned (it
    /// wins over a tag, as in containerd), otherwise the tag.
    pub fn manifest_reference(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or(DEFAULT_TAG)
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.domain, self.path)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Reference {
    type Err = ReferenceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse_normalized(s)
    }
}

/// Whether `s` is an image ID (`sha256:` and 64 lowercase hex), as CRI accepts in
/// place of a reference for status and removal.
pub fn is_image_id(s: &str) -> bool {
    s.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && is_lower_hex(hex))
}

/// Docker's rule: the first component is a registry if it has a '.' or ':', is
/// `localhost`, or has an uppercase letter; otherwise the name is on Docker Hub.
fn split_domain(name: &str) -> (String, String) {
    let (domain, path) = match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.chars().any(|c| c.is_ascii_uppercase()) =>
        {
            (first.to_owned(), rest.to_owned())
        }
        _ => (DEFAULT_DOMAIN.to_owned(), name.to_owned()),
    };
    let domain = if domain == "index.docker.io" {
        DEFAULT_DOMAIN.to_owned()
    } else {
        domain
    };
    let path = if domain == DEFAULT_DOMAIN && !path.contains('/') {
        format!("{OFFICIAL_REPO_PREFIX}{path}")
    } else {
        path
    };
    (domain, path)
}

fn validate_domain(domain: &str) -> Result<(), ReferenceError> {
    let invalid = || ReferenceError::InvalidDomain {
        domain: domain.to_owned(),
    };
    let (host, port) = match domain.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (domain, None),
    };
    if let Some(port) = port
        && (port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(ReferenceError::InvalidPort {
            domain: domain.to_owned(),
        });
    }
    if host.is_empty() {
        return Err(invalid());
    }
    let component_ok = |c: &str| {
        !c.is_empty()
            && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !c.starts_with('-')
            && !c.ends_with('-')
    };
    if host.split('.').all(component_ok) {
        Ok(())
    } else {
        Err(invalid())
    }
}

fn validate_path(path: &str) -> Result<(), ReferenceError> {
    if path.chars().any(|c| c.is_ascii_uppercase()) {
        return Err(ReferenceError::Uppercase {
            name: path.to_owned(),
        });
    }
    for component in path.split('/') {
        if !path_component_ok(component) {
            return Err(ReferenceError::InvalidPathComponent {
                name: path.to_owned(),
                component: component.to_owned(),
            });
        }
    }
    Ok(())
}

/// `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
fn path_component_ok(component: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let mut rest = component;
    loop {
        let run = rest.find(|c: char| !alnum(c)).unwrap_or(rest.len());
        if run == 0 {
            return false;
        }
        rest = &rest[run..];
        if rest.is_empty() {
            return true;
        }
        let sep = rest.find(alnum).unwrap_or(rest.len());
        let separator = &rest[..sep];
        let separator_ok = matches!(separator, "." | "_" | "__")
            || (!separator.is_empty() && separator.bytes().all(|b| b == b'-'));
        if !separator_ok {
            return false;
        }
        rest = &rest[sep..];
    }
}

fn validate_tag(tag: &str) -> Result<(), ReferenceError> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut chars = tag.chars();
    let ok = tag.len() <= TAG_LENGTH_MAX
        && chars.next().is_some_and(word)
        && chars.all(|c| word(c) || c == '.' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(ReferenceError::InvalidTag {
            tag: tag.to_owned(),
        })
    }
}

fn validate_digest(digest: &str) -> Result<(), ReferenceError> {
    let invalid = |reason| ReferenceError::InvalidDigest {
        digest: digest.to_owned(),
        reason,
    };
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return Err(invalid("missing the algorithm: expected algorithm:hex"));
    };
    let algorithm_ok = !algorithm.is_empty()
        && algorithm.split(['+', '.', '-', '_']).all(|component| {
            let mut chars = component.chars();
            chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && chars.all(|c| c.is_ascii_alphanumeric())
        });
    if !algorithm_ok {
        return Err(invalid("malformed algorithm"));
    }
    match algorithm {
        "sha256" if hex.len() != 64 => Err(invalid("sha256 needs 64 hex characters")),
        "sha512" if hex.len() != 128 => Err(invalid("sha512 needs 128 hex characters")),
        "sha256" | "sha512" if !is_lower_hex(hex) => Err(invalid("hex must be lowercase 0-9a-f")),
        "sha256" | "sha512" => Ok(()),
        _ if hex.len() < 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Err(invalid("needs at least 32 hex characters"))
        }
        _ => Err(invalid("unsupported algorithm")),
    }
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
#[path = "reference_tests.rs"]
mod tests;
